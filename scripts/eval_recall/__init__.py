"""Recall evaluation on LoCoMo-format data: loading, metrics, the daemon run (scripts/eval-recall)."""
