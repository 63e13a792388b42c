"""The master-slave controller: a 3-member pysyncobj group that decides, per broker group, who
the master is (electing only from the in-sync set), the master epoch, and the masters' leases.
Metadata only: no message data passes through it.

- ``state``: the pure state machine every member applies in log order;
- ``member``: the pysyncobj member that replicates it (password required, bound to its own
  address);
- ``service``: the gRPC service brokers call, leases and the election loop (leading member);
- ``client``: what a broker uses; ``config``: a member's settings.
"""
