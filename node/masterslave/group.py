"""MasterSlaveMember: the running pieces of one master-slave node, opened, started and
stopped together (the Raft mode's counterpart is node/replication/member.py).

A master opens its store with no dispatch bound (static mode: nothing it stores can be taken
back by a failover) and serves the HA stream; a slave opens its store, and (``start``) its
replicator streams the master's CommitLog into it.

Rules this module keeps: the master is named by the configuration (static mode: broker_id 0,
and each slave's ``ha_master_address``); a member never changes role while it runs;
retention runs on the store directly (there is no Raft log to compact first).
"""

from __future__ import annotations

import grpc

from raftlog.node.config import NodeConfig
from raftlog.node.control import CONTROL_QUEUE_ID, CONTROL_TOPIC
from raftlog.node.masterslave.epochs import EpochHistory
from raftlog.node.masterslave.ha_service import HaPeerService, HaServiceSettings
from raftlog.node.masterslave.in_sync import InSyncSet
from raftlog.node.masterslave.master_state import MasterState
from raftlog.node.masterslave.replicator import ReplicatorSettings, SlaveReplicator
from raftlog.node.masterslave.write_path import GroupSettings, MasterSlaveWritePath
from raftlog.proto import peer_pb2, peer_pb2_grpc
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.message_store import MessageStore

PEER_SERVICE_NAME = peer_pb2.DESCRIPTOR.services_by_name["HaPeer"].full_name


def _master_id(config: NodeConfig) -> str:
    if config.role != "SLAVE":
        return config.node_id
    return next(n for n, a in config.peers.items() if a == config.ha_master_address)


class MasterSlaveMember:
    peer_service_name = PEER_SERVICE_NAME

    def __init__(self, config: NodeConfig, store_host: tuple[str, int]) -> None:
        self.store = MessageStore.open(
            config.store_config(),
            OsFileSystem(),
            store_host=store_host,
            housekeeping_interval_ms=None,
        )
        try:
            self.store.create_topic(CONTROL_TOPIC, CONTROL_QUEUE_ID + 1)
        except BaseException:
            self.store.close()
            raise
        try:
            self.history = EpochHistory.load(config.data_dir)
        except BaseException:
            self.store.close()
            raise
        master_id = _master_id(config)
        self.master: MasterState | None = None
        self._replicator: SlaveReplicator | None = None
        self._ha_service: HaPeerService | None = None
        if config.role != "SLAVE":
            log = self.store.commit_log
            sync_flush = config.flush_type == "SYNC_FLUSH"
            self.master = MasterState(
                InSyncSet(
                    config.in_sync_replicas_needed,
                    config.ha_max_gap_not_in_sync_bytes,
                    config.ha_max_time_slave_not_catchup_ms,
                ),
                (lambda: log.flushed_offset) if sync_flush else (lambda: log.max_offset),
                synchronous=config.role == "SYNC_MASTER",
            )
            self._ha_service = HaPeerService(
                HaServiceSettings(config.cluster_id, config.broker_name),
                self.store,
                self.master,
                self.history,
            )
        self.write_path = MasterSlaveWritePath(
            GroupSettings(
                cluster_id=config.cluster_id,
                broker_name=config.broker_name,
                node_id=config.node_id,
                role=config.role,
                master_id=master_id,
                members=dict(config.peers),
                sync_timeout_s=config.sync_flush_timeout_ms / 1000,
            ),
            self.store,
            self.master,
        )
        if config.role == "SLAVE":
            assert config.ha_master_address is not None
            self._replicator = SlaveReplicator(
                ReplicatorSettings(
                    config.cluster_id, config.broker_name, config.node_id, config.ha_master_address
                ),
                self.store,
                self.history,
                self.write_path.notify_visible,
            )

    def add_peer_service(self, server: grpc.Server) -> None:
        if self._ha_service is not None:
            peer_pb2_grpc.add_HaPeerServicer_to_server(self._ha_service, server)  # type: ignore[no-untyped-call]

    @property
    def failed(self) -> bool:
        return False

    def run_retention(self) -> None:
        self.store.run_retention()

    def start(self) -> None:
        if self._replicator is not None:
            self._replicator.start()

    def stop_replication(self) -> None:
        """Before the server stops: end the slaves' streams (master) or our own (slave)."""
        if self.master is not None:
            self.master.close()
        if self._replicator is not None:
            self._replicator.close()

    def close(self) -> None:
        self.store.close()
