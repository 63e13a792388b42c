"""ControllerServer: run one controller member: the pysyncobj member, its gRPC service and the
election loop, until stopped (``raftlog controller start``).

Rules this module keeps: start order is the member, then the loop, then gRPC; stop order the
reverse; the gRPC server listens only on the member's own gRPC address.
"""

from __future__ import annotations

import logging
import signal
import threading
from concurrent import futures
from types import FrameType

import grpc

from raftlog.controller.config import ControllerConfig
from raftlog.controller.member import ControllerMember
from raftlog.controller.service import ControllerService, LeaseSettings
from raftlog.proto import controller_pb2_grpc

_log = logging.getLogger("raftlog.controller")


class ControllerServer:
    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self.member = ControllerMember(
            config.raft_address, config.other_raft_addresses, config.data_dir, config.password
        )
        self.service = ControllerService(
            self.member, LeaseSettings(lease_ms=config.lease_ms), config.grpc_address_of_raft
        )
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        controller_pb2_grpc.add_ControllerServicer_to_server(self.service, self._server)  # type: ignore[no-untyped-call]
        if self._server.add_insecure_port(config.grpc_address) == 0:
            self.member.destroy()
            raise OSError(f"cannot listen on {config.grpc_address}")

    def start(self) -> None:
        self.service.start()
        self._server.start()
        _log.info(
            "controller member %s: raft %s, gRPC %s",
            self.config.member_id,
            self.config.raft_address,
            self.config.grpc_address,
        )

    def stop(self) -> None:
        self._server.stop(0.5).wait()
        self.service.close()
        self.member.destroy()


def serve(config: ControllerConfig) -> int:
    """Run a member until SIGTERM/SIGINT."""
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server = ControllerServer(config)
    server.start()
    stop.wait()
    server.stop()
    return 0
