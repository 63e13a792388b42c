"""The client-facing gRPC services of a node (client.proto): Producer, Consumer and Admin,
with wire validation (``wire``), the error -> status mapping (``status_codes``) and the
request limits (``limits``). They see replication only through ``raftlog.node.write_path``.
"""
