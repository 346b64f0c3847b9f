"""Framing, connection handling and JSON-RPC 2.0 dispatch."""
