"""MasterSlaveWritePath: the WritePath (node/write_path.py) of replication = "master-slave".

On the master a write goes straight to the local store (validated, stamped, written and,
under SYNC_FLUSH, fsynced), the slaves' streams are woken, and a SYNC_MASTER then waits for
its in-sync slaves (MasterState). On a slave every write is refused with the master's
address, as Raft followers refuse with the leader's.

Rules this module keeps:
- A write is stored on the master before any status is decided: SEND_OK,
  FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE all mean "stored on the master"; the latter two
  say it is not (yet) on enough slaves. None of them is reported as a failure.
- Topics and consumer offsets travel as control records in the same CommitLog stream (so a
  slave has them in log order), and are applied on the master once written. Their calls
  have no status to carry "not replicated", so a SYNC_MASTER whose record is neither
  confirmed nor held by its whole in-sync set (so an election could take it back) answers
  UnknownOutcomeError (the caller retries), never success.
- The idempotent producer (producer_id + sequence) is deduplicated by the master from the
  markers its log holds (sequences.py), across restarts and failovers.
- One writer at a time: the master's store serialises writes itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from raftlog.node.control import (
    STORE_COMMAND_TYPES,
    ChangeAccess,
    CommitOffsets,
    ControlCommand,
    CreateTopic,
    ProduceMarker,
    apply_to_store,
    control_message,
)
from raftlog.node.errors import InvalidRequestError, NotLeaderError, UnknownOutcomeError
from raftlog.node.masterslave.master_state import SEND_OK, MasterState
from raftlog.node.masterslave.roles import RoleHolder
from raftlog.node.masterslave.sequences import ProducerSequences
from raftlog.node.write_checks import (
    check_encoded_topics,
    check_new_topic,
    check_offsets,
    existing_topic,
    refuse_reserved,
)
from raftlog.node.write_path import ClusterView, MemberView, ProduceOutcome
from raftlog.store.message_store import Message, MessageStore, PutResult
from raftlog.store.record import read_store_timestamp_ms
from raftlog.store.topic_config import TopicConfig

# Enough of a record to read its store timestamp, whatever its host variant.
_RECORD_HEAD_BYTES = 128
# Idempotent producers idle longer than this are forgotten (as the Raft mode's table).
_PRODUCER_RETENTION_MS = 15 * 60 * 1000


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """The broker group as this node's configuration describes it (who is master now is the
    RoleHolder's business)."""

    cluster_id: str
    broker_name: str
    node_id: str
    broker_role: str  # SYNC_MASTER, ASYNC_MASTER or SLAVE, as configured
    members: dict[str, str]  # node id -> address
    sync_timeout_s: float
    slave_read_enable: bool = False  # a slave serves pulls even while its master is live


class MasterSlaveWritePath:
    def __init__(
        self,
        settings: GroupSettings,
        store: MessageStore,
        roles: RoleHolder,
        master_live: Callable[[], bool] = lambda: False,
    ) -> None:
        """``master_live``: whether this member, as a slave, is copying from its master now
        (its HA stream is up)."""
        self._settings = settings
        self._store = store
        self._roles = roles
        self._master_live = master_live
        self._sequences = ProducerSequences(_PRODUCER_RETENTION_MS)
        self.visible = threading.Condition()

    # -- who may write ------------------------------------------------------------------------

    def _require_master(self) -> MasterState:
        return self._roles.writable_master()

    def notify_visible(self) -> None:
        with self.visible:
            self.visible.notify_all()

    # -- writes -------------------------------------------------------------------------------

    def produce(
        self,
        messages: Sequence[Message],
        *,
        producer_id: str,
        sequence: int,
        timeout_s: float,
    ) -> ProduceOutcome:
        master = self._require_master()
        refuse_reserved({m.topic for m in messages})
        if not messages:
            raise InvalidRequestError("the batch holds no message")

        def write() -> ProduceOutcome:
            marker = _marker(producer_id, sequence)
            results = self._store.put_messages([*messages, *marker])[: len(messages)]
            return self._outcome(master, results, [m.queue_id for m in messages], timeout_s)

        return self._once(producer_id, sequence, write)

    def rebuild_sequences(self) -> int:
        """A new master replays the idempotence markers its log holds (sequences.py)."""
        return self._sequences.rebuild(self._store, int(time.time() * 1000))

    def _once(
        self, producer_id: str, sequence: int, write: Callable[[], ProduceOutcome]
    ) -> ProduceOutcome:
        """``write()``, or for an idempotent producer the dedup verdict of its sequence."""
        if not producer_id:
            return write()
        with self._sequences.hold(producer_id) as producer:
            self._sequences.await_turn(producer, sequence)
            earlier = self._sequences.earlier_outcome(producer, producer_id, sequence)
            if earlier is not None:
                return earlier
            outcome = write()
            self._sequences.record(producer, sequence, outcome)
            return outcome

    def produce_encoded(
        self,
        topic: str,
        records: bytes,
        *,
        producer_id: str,
        sequence: int,
        timeout_s: float,
    ) -> ProduceOutcome:
        master = self._require_master()
        entries = self._store.check_encoded(records)
        if not entries:
            raise InvalidRequestError("the batch holds no message")
        check_encoded_topics(topic, entries)

        def write() -> ProduceOutcome:
            results = self._store.put_encoded(records, _marker(producer_id, sequence))
            results = results[: len(entries)]
            return self._outcome(master, results, [queue for (_, queue), _ in entries], timeout_s)

        return self._once(producer_id, sequence, write)

    def _outcome(
        self,
        master: MasterState,
        results: list[PutResult],
        queue_ids: list[int],
        timeout_s: float,
    ) -> ProduceOutcome:
        self.notify_visible()
        log = self._store.commit_log
        first = results[0].physical_offset
        head = log.read(first, min(_RECORD_HEAD_BYTES, log.max_offset - first))
        status = master.wait_replicated(
            self._end_of(results), min(timeout_s, self._settings.sync_timeout_s)
        )
        return ProduceOutcome(
            results=results,
            queue_ids=queue_ids,
            store_timestamp_ms=read_store_timestamp_ms(head),
            duplicate=False,
            raft_index=0,
            raft_term=self._roles.current().epoch,
            replication_status=status,
        )

    def _end_of(self, results: list[PutResult]) -> int:
        """Where the last of ``results``' records ends in the CommitLog."""
        last = results[-1].physical_offset
        return last + int.from_bytes(self._store.commit_log.read(last, 4), "big")

    def _control(self, command: ControlCommand, timeout_s: float) -> str:
        """Write ``command`` as a control record, apply it here, wait like a produce (its
        replication status, without a ProduceOutcome's timestamp read)."""
        master = self._require_master()
        assert isinstance(command, STORE_COMMAND_TYPES)
        results = self._store.put_messages([control_message(command)])
        apply_to_store(self._store, command)
        self.notify_visible()
        end = self._end_of(results)
        status = master.wait_replicated(end, min(timeout_s, self._settings.sync_timeout_s))
        if status != SEND_OK and not master.election_safe(end):
            raise UnknownOutcomeError(
                f"{type(command).__name__} is stored on the master but not on enough in-sync "
                f"slaves ({status}): a failover may take it back; retry it"
            )
        return status

    def commit_offsets(
        self, group: str, offsets: Sequence[tuple[str, int, int]], *, timeout_s: float
    ) -> int:
        self._require_master()
        check_offsets(self._store, offsets)
        self._control(CommitOffsets(group, tuple(offsets)), timeout_s)
        return 0

    def fetch_offsets(
        self, group: str, queues: Sequence[tuple[str, int]], *, timeout_s: float
    ) -> list[int | None]:
        self._require_master()  # the master is the one writer: its store is the latest
        return [self._store.fetch_consumer_offset(group, t, q) for t, q in queues]

    def create_topic(
        self, topic: str, queue_count: int, *, timeout_s: float
    ) -> tuple[TopicConfig, bool]:
        check_new_topic(self._store, topic, queue_count)
        self._require_master()
        existing = existing_topic(self._store, topic, queue_count)
        if existing is not None:
            return existing, False
        self._control(CreateTopic(topic, queue_count), timeout_s)
        return self._store.describe_topic(topic), True

    def change_access(self, change: ChangeAccess, *, timeout_s: float) -> None:
        self._require_master()
        self._control(change, timeout_s)

    def transfer_leadership(self, target_id: str | None, *, timeout_s: float) -> ClusterView:
        raise InvalidRequestError(
            "a master-slave group has no leadership transfer: in static mode the master is "
            "broker_id 0 (restart the group with another master to change it)"
        )

    # -- views --------------------------------------------------------------------------------

    def cluster_view(self) -> ClusterView:
        settings = self._settings
        role = self._roles.current()
        master = role.master_state
        log = self._store.commit_log
        lags = {lag.node_id: lag for lag in master.lags()} if master is not None else {}
        members = []
        for node_id, address in sorted(settings.members.items()):
            lag = lags.get(node_id)
            is_master = node_id == role.master_id
            members.append(
                MemberView(
                    node_id=node_id,
                    address=address,
                    role="leader" if is_master else "follower",
                    voter=True,
                    has_progress=lag is not None,
                    match_index=lag.acked_offset if lag is not None else 0,
                    lag_entries=lag.lag_bytes if lag is not None else 0,
                    recent_active=lag is not None,
                    lag_bytes=lag.lag_bytes if lag is not None else 0,
                    lag_ms=lag.lag_ms if lag is not None else 0,
                    in_sync=lag.in_sync if lag is not None else is_master,
                )
            )
        return ClusterView(
            cluster_id=settings.cluster_id,
            node_id=settings.node_id,
            role="leader" if master is not None else "follower",
            leader_id=role.master_id,
            leader_address=settings.members.get(role.master_id) if role.master_id else None,
            term=role.epoch,
            commit_index=master.confirmed_offset() if master is not None else 0,
            applied_index=self._store.dispatched_physical_offset,
            last_index=log.max_offset,
            members=members,
            transferring_to=None,
            replication="master-slave",
            broker_name=settings.broker_name,
            broker_role=_role_name(master),
        )

    def check_read(self) -> None:
        """A slave sends consumers to its master while it copies from a live one, unless
        ``slave_read_enable``; with the master down or unreachable, it serves what it holds
        (only what the group confirmed), so the group stays readable."""
        role = self._roles.current()
        if self._settings.slave_read_enable or role.master_state is not None:
            return
        if role.master_id is None or not self._master_live():
            return
        raise NotLeaderError(role.master_id, self._settings.members.get(role.master_id), role.epoch)

    def catch_up(self, timeout_s: float) -> bool:
        """A slave cannot confirm it holds what its master acknowledged (nor can a master
        know of a newer master): what this member holds is the answer."""
        return False

    def wait_visible(self, after_physical_offset: int, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        with self.visible:
            while self._store.dispatched_physical_offset <= after_physical_offset:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.visible.wait(remaining)
        return self._store.dispatched_physical_offset


def _role_name(master: MasterState | None) -> str:
    if master is None:
        return "SLAVE"
    return "SYNC_MASTER" if master.synchronous else "ASYNC_MASTER"


def _marker(producer_id: str, sequence: int) -> list[Message]:
    """The idempotence marker written right after an idempotent batch (none otherwise)."""
    if not producer_id:
        return []
    return [control_message(ProduceMarker(producer_id, sequence))]
