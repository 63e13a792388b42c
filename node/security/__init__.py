"""Transport security of a node: ``tls`` (server and peer credentials that reload when their
files change, and the names a peer's certificate carries)."""
