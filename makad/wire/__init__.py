"""Wire types: each domain module's msgspec Structs and its ``METHODS``.

The method catalogue that joins them is ``makad.wire.catalogue.CATALOGUE``. This package
imports nothing itself, so the daemon can load the few types it answers with before it
listens (``makad.wire.system``) and the rest afterwards (``makad.daemon``).
"""
