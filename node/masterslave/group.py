"""MasterSlaveMember: the running pieces of one master-slave node, opened, started and
stopped together (the Raft mode's counterpart is node/replication/member.py).

A master opens its store with no dispatch bound (static mode: nothing it stores can be taken
back by a failover) and serves the HA stream; a slave opens its store, and (``start``) its
replicator streams the master's CommitLog into it.

Rules this module keeps: in static mode the configuration names the master (broker_id 0, and
each slave's ``ha_master_address``) and roles never change; ``become_master`` and ``follow``
(what a controller drives) change them one at a time, under one lock; retention runs on the
store directly (there is no Raft log to compact first).
"""

from __future__ import annotations

import logging
import threading

import grpc

from raftlog.controller.client import ControllerClient
from raftlog.node.config import NodeConfig
from raftlog.node.control import CONTROL_QUEUE_ID, CONTROL_TOPIC
from raftlog.node.masterslave.controller_link import ControllerLink, LinkSettings
from raftlog.node.masterslave.epochs import EpochHistory
from raftlog.node.masterslave.ha_service import HaPeerService, HaServiceSettings
from raftlog.node.masterslave.in_sync import InSyncSet
from raftlog.node.masterslave.master_state import MasterState
from raftlog.node.masterslave.replicator import ReplicatorSettings, SlaveReplicator
from raftlog.node.masterslave.roles import GroupRole, RoleHolder
from raftlog.node.masterslave.write_path import GroupSettings, MasterSlaveWritePath
from raftlog.node.peer.dialer import PeerDialer
from raftlog.proto import peer_pb2, peer_pb2_grpc
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.message_store import MessageStore

_log = logging.getLogger("raftlog.node.masterslave")
PEER_SERVICE_NAME = peer_pb2.DESCRIPTOR.services_by_name["HaPeer"].full_name


def _master_id(config: NodeConfig) -> str:
    if config.role != "SLAVE":
        return config.node_id
    return next(n for n, a in config.peers.items() if a == config.ha_master_address)


class MasterSlaveMember:
    peer_service_name = PEER_SERVICE_NAME

    def __init__(self, config: NodeConfig, store_host: tuple[str, int], dialer: PeerDialer) -> None:
        self._config = config
        self._dialer = dialer
        self.store = MessageStore.open(
            config.store_config(),
            OsFileSystem(),
            store_host=store_host,
            # Under a controller readers see only what the group confirmed: a failover never
            # takes back what a consumer has seen. Static mode has no failover to fear.
            dispatch_bound=self._dispatch_bound if config.controlled else None,
            housekeeping_interval_ms=None,
        )
        try:
            self.store.create_topic(CONTROL_TOPIC, CONTROL_QUEUE_ID + 1)
            self.history = EpochHistory.load(config.data_dir)
        except BaseException:
            self.store.close()
            raise
        self._change_lock = threading.Lock()
        self.store.on_append = self._appended
        self._replicator: SlaveReplicator | None = None
        self.roles = RoleHolder(
            GroupRole(None, self.history.last_epoch), dict(config.peers), leased=config.controlled
        )
        self._link: ControllerLink | None = None
        self.write_path = MasterSlaveWritePath(
            GroupSettings(
                cluster_id=config.cluster_id,
                broker_name=config.broker_name,
                node_id=config.node_id,
                broker_role=config.role,
                members=dict(config.peers),
                sync_timeout_s=config.sync_flush_timeout_ms / 1000,
                slave_read_enable=config.slave_read_enable,
            ),
            self.store,
            self.roles,
            self._master_live,
        )
        self._ha_service = HaPeerService(
            HaServiceSettings(
                config.cluster_id,
                config.broker_name,
                slave_ids=frozenset(config.peers) - {config.node_id},
                check_certificates=config.tls_enabled,
            ),
            self.store,
            self.roles,
            self.history,
        )

    def _dispatch_bound(self) -> int:
        roles: RoleHolder | None = getattr(self, "roles", None)
        if roles is None:  # the store is still opening: nothing is confirmed yet
            return 0
        role = roles.current()
        if role.master_state is not None:
            return role.master_state.confirmed_offset()
        replicator = self._replicator
        return replicator.confirm_offset if replicator is not None else 0  # no role yet

    def _master_live(self) -> bool:
        replicator = self._replicator
        return replicator is not None and replicator.connected

    def _confirmed_moved(self) -> None:
        self.store.dispatch()
        self.write_path.notify_visible()

    def log_end(self) -> int:
        return self.store.commit_log.max_offset

    def _appended(self) -> None:
        state = self.roles.current().master_state
        if state is not None:
            state.written()

    # -- roles --------------------------------------------------------------------------------

    def become_master(self, epoch: int) -> None:
        """Take writes as the master of ``epoch`` (static mode: at start; under a controller:
        when elected). A slave first stops copying; the store's queue offsets are re-read
        from what it holds, and the epoch starts at its CommitLog's end."""
        config = self._config
        with self._change_lock:
            self._stop_following()
            self.store.reload_next_queue_offsets()
            replayed = self.write_path.rebuild_sequences()
            self.history.begin(epoch, self.store.commit_log.max_offset)
            log = self.store.commit_log
            sync_flush = config.flush_type == "SYNC_FLUSH"
            state = MasterState(
                InSyncSet(
                    config.in_sync_replicas_needed,
                    config.ha_max_gap_not_in_sync_bytes,
                    config.ha_max_time_slave_not_catchup_ms,
                ),
                (lambda: log.flushed_offset) if sync_flush else (lambda: log.max_offset),
                synchronous=config.role != "ASYNC_MASTER",
                log_end=lambda: log.max_offset,
            )
            state.on_confirmed = self._confirmed_moved
            if config.controlled:  # what the controller holds right after electing us
                state.set_agreed(config.node_id, frozenset({config.node_id}))
            self.roles.swap(GroupRole(config.node_id, epoch, state))
            _log.info(
                "%s is the master of epoch %d (%d producer sequences replayed)",
                config.node_id,
                epoch,
                replayed,
            )

    def follow(self, master_id: str, epoch: int, address: str | None = None) -> None:
        """Copy ``master_id``'s CommitLog as its slave in ``epoch``; a master steps down
        first (its slaves' streams end, its writes are refused from now on). The master is
        reached at its ``peers`` entry, as this node was told to reach it (as Raft mode does),
        and at ``address`` (what the master registered with the controller) only when it is
        not among the peers."""
        config = self._config
        client_address = config.peers.get(master_id, address)
        if client_address is None:
            raise ValueError(f"no address for master {master_id!r}: not a peer, none given")
        target = self._dialer.address_of(master_id, client_address)
        with self._change_lock:
            previous = self.roles.swap(GroupRole(master_id, epoch))
            if previous.master_state is not None:
                previous.master_state.close()
            self._stop_following()
            self._replicator = SlaveReplicator(
                ReplicatorSettings(
                    config.cluster_id,
                    config.broker_name,
                    config.node_id,
                    target,
                    master_id,
                    self._dialer,
                ),
                self.store,
                self.history,
                self.write_path.notify_visible,
            )
            self._replicator.start()
            _log.info("%s follows %s in epoch %d", config.node_id, master_id, epoch)

    def _stop_following(self) -> None:
        if self._replicator is not None:
            self._replicator.close()
            self._replicator = None

    # -- life ---------------------------------------------------------------------------------

    def add_peer_service(self, server: grpc.Server) -> None:
        peer_pb2_grpc.add_HaPeerServicer_to_server(self._ha_service, server)  # type: ignore[no-untyped-call]

    @property
    def failed(self) -> bool:
        return False

    def run_retention(self) -> None:
        self.store.run_retention()

    def start(self) -> None:
        """Static mode: the configured role (broker_id 0 is the master); under a controller,
        no role until the controller names one."""
        config = self._config
        if config.controller_addresses is not None:
            addresses = [a.strip() for a in config.controller_addresses.split(",") if a.strip()]
            self._link = ControllerLink(
                ControllerClient(addresses),
                self,
                LinkSettings(config.broker_name, config.node_id, config.advertised),
            )
            self._link.start()
        elif config.role == "SLAVE":
            self.follow(_master_id(config), self.history.last_epoch)
        else:
            self.become_master(self.history.last_epoch)

    def stop_replication(self, handover_s: float = 0.0) -> None:
        """Before the server stops: end the slaves' streams (master) or our own (slave).
        ``handover_s``: unused (a master-slave node hands nothing over when it stops)."""
        if self._link is not None:
            self._link.close()
        with self._change_lock:
            previous = self.roles.swap(GroupRole(None, self.roles.current().epoch))
            if previous.master_state is not None:
                previous.master_state.close()
            self._stop_following()

    def close(self) -> None:
        self.store.close()
