"""Robustness runs for makad: the crash loop and the load run behind scripts/soak."""
