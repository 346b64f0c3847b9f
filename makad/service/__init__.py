"""One async method per RPC method; composes the pure core and the stores, knows no JSON."""
