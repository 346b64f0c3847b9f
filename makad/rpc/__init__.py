"""Framing, connection handling and dispatch: the only importer of jsonrpcserver."""
