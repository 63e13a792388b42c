"""A simulated cluster: drivers, disks, network, clock, checkers and workload wired together.

Rules this module keeps:
- The cluster offers single steps (tick, deliver one message, crash, restart, partition,
  propose, ...); who chooses them is the caller's business (the seeded FaultSchedule, or the
  Hypothesis state machine). Every step leaves all checkers run on what it changed.
- Node ids are "n1".."nN" and every loop over nodes goes in sorted order.
- Randomness: the cluster's own ``random.Random`` hands a child seed to the network, to crash
  tearing, and to every new RawNode life; nothing else draws from it.
- Calls into a node that could re-enter it (snapshot and unreachable reports) wait until its
  Ready is drained.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from raftlog.node.replication.planted_bugs import NodePlantedBug
from raftlog.raft.config import Config
from raftlog.raft.types import (
    ConfChange,
    ConfState,
    Entry,
    Message,
    MessageType,
    NodeId,
    PlantedBug,
    ProposalDroppedError,
    Ready,
    Role,
)

from .checkers import SafetyChecker
from .clock import SimClock
from .driver import NodeDriver, SimCrash
from .history import History
from .network import Envelope, Network, NetworkFaults
from .options import SimOptions
from .workload import Workload

_EPOCH_MS = 1_764_000_000_000


@dataclass(frozen=True, slots=True)
class TransportReport:
    """What the transport tells a sender afterwards: a SNAPSHOT's outcome (``success``), or
    that ``target`` is unreachable (``success`` None)."""

    source: NodeId
    source_incarnation: int
    target: NodeId
    success: bool | None


class Cluster:
    def __init__(
        self, options: SimOptions, rng: random.Random, history: History, root_dir: str
    ) -> None:
        self.options = options
        self.history = history
        self.clock = SimClock()
        self.node_ids = tuple(f"n{number}" for number in range(1, options.node_count + 1))
        self.network = Network(random.Random(rng.getrandbits(64)), NetworkFaults())
        self._crash_rng = random.Random(rng.getrandbits(64))
        self._node_seeds = random.Random(rng.getrandbits(64))
        self.checker = SafetyChecker(self.node_ids)
        self.workload = Workload()
        self.crash_after_vote_probability = 0.0
        self.leader_crash_before_send_probability = 0.0
        conf_state = ConfState(voters=self.node_ids)
        self.drivers = {
            node_id: NodeDriver(node_id, conf_state, root_dir) for node_id in self.node_ids
        }
        node_bugs = frozenset(b for b in options.planted_bugs if isinstance(b, NodePlantedBug))
        for driver in self.drivers.values():
            driver.planted_bugs = node_bugs
        self._seen_roles: dict[NodeId, tuple[Role, int]] = {}
        self._crash_soon: set[NodeId] = set()
        self._transport_reports: list[TransportReport] = []
        # (observer, its incarnation, the node whose process ended), delivered like transport
        # reports: between calls, never into a node whose Ready is still outstanding.
        self._gone_reports: list[tuple[NodeId, int, NodeId]] = []
        self._calls_in_progress = 0
        for node_id in self.node_ids:
            self.restart(node_id)

    # -- node lives ------------------------------------------------------------------------

    def _config(self, node_id: NodeId, applied_index: int) -> Config:
        options = self.options
        return Config(
            node_id=node_id,
            election_ticks=options.election_ticks,
            heartbeat_ticks=options.heartbeat_ticks,
            pre_vote=options.pre_vote,
            check_quorum=options.check_quorum,
            max_inflight_appends=options.max_inflight_appends,
            max_append_bytes=options.max_append_bytes,
            announce_commit_on_tick=options.announce_commit_on_tick,
            applied_index=applied_index,
            planted_bugs=frozenset(b for b in options.planted_bugs if isinstance(b, PlantedBug)),
        )

    def restart(self, node_id: NodeId) -> None:
        driver = self.drivers[node_id]
        config = self._config(node_id, driver.restored_index())
        driver.start(config, random.Random(self._node_seeds.getrandbits(64)), self, self.now_ms)
        hard_state = driver.disk.current.hard_state
        self.checker.observe_durable(node_id, driver.disk.synced)
        self.history.record(
            self.clock.now_tick,
            "restart",
            node_id,
            hard_state.term,
            hard_state.vote,
            hard_state.commit,
            driver.disk.current.last_index,
        )
        self._after_call(driver)

    def now_ms(self) -> int:
        """The simulated wall clock the stores stamp: one second per tick, from a fixed epoch."""
        return _EPOCH_MS + self.clock.now_tick * 1000

    def close(self) -> None:
        """End of a run: every node lets go of its real lock file."""
        for node_id in sorted(self.drivers):
            self.drivers[node_id].release_lock()

    def crash(self, node_id: NodeId, torn: bool) -> None:
        driver = self.drivers[node_id]
        unsynced = driver.disk.unsynced_count()
        driver.crash(self._crash_rng, torn)
        self._crash_soon.discard(node_id)
        self._seen_roles.pop(node_id, None)
        self.checker.forget_node(node_id)
        self.history.record(self.clock.now_tick, "crash", node_id, unsynced, torn)
        # What it synced before dying (a crash inside a Ready skips the ``persisted`` hook);
        # the restart replaces this with what the files actually recovered to.
        self.checker.observe_durable(node_id, driver.disk.synced)
        self._report_process_gone(node_id)
        self._flush_transport_reports()

    def _report_process_gone(self, node_id: NodeId) -> None:
        """A crashed process closes its connections: every live node it can still reach sees
        its stream end and tells its core (node/peer/service.py does this for real, from
        another thread: so here too it arrives after the call in progress)."""
        for other_id in self.up_nodes():
            if not self.network.is_blocked(node_id, other_id):
                other = self.drivers[other_id]
                self._gone_reports.append((other_id, other.incarnation, node_id))

    def up_nodes(self) -> list[NodeId]:
        return [node_id for node_id in self.node_ids if self.drivers[node_id].is_up]

    def down_nodes(self) -> list[NodeId]:
        return [node_id for node_id in self.node_ids if not self.drivers[node_id].is_up]

    def leader(self) -> NodeId | None:
        """The live leader with the highest term, if any."""
        best: tuple[int, NodeId] | None = None
        for node_id in self.up_nodes():
            node = self.drivers[node_id].node
            assert node is not None
            if node.role == Role.LEADER and (best is None or node.term > best[0]):
                best = (node.term, node_id)
        return best[1] if best is not None else None

    # -- time and messages ------------------------------------------------------------------

    def tick(self, deliver_due: bool = True) -> None:
        """One tick: deliver what is due (unless the caller delivers by hand), tick every live
        node, run the per-tick checks."""
        now_tick = self.clock.advance()
        while deliver_due:
            envelope = self.network.pop_due(now_tick)
            if envelope is None:
                break
            self.deliver(envelope)
        for node_id in self.up_nodes():
            driver = self.drivers[node_id]
            assert driver.node is not None
            driver.node.tick()
            self._after_call(driver)
        self.checker.check_committed_durable()

    def deliver(self, envelope: Envelope) -> None:
        message = envelope.message
        driver = self.drivers[message.target]
        if driver.node is None or self.network.is_blocked(message.source, message.target):
            self.drop(envelope)
            return
        self.history.record(self.clock.now_tick, "recv", *_message_fields(message))
        if message.type == MessageType.SNAPSHOT:
            assert message.snapshot is not None and envelope.snapshot_copy is not None
            driver.stage_snapshot(message.snapshot, envelope.snapshot_copy)
            self._transport_reports.append(
                TransportReport(message.source, envelope.source_incarnation, message.target, True)
            )
        driver.node.step(message)
        self._after_call(driver)

    def drop(self, envelope: Envelope) -> None:
        message = envelope.message
        self.history.record(self.clock.now_tick, "drop", *_message_fields(message))
        if message.type == MessageType.SNAPSHOT:
            self._transport_reports.append(
                TransportReport(message.source, envelope.source_incarnation, message.target, False)
            )
            self._flush_transport_reports()

    def _after_call(self, driver: NodeDriver) -> None:
        """Drain the node's Ready, observe its role, then do what had to wait for that."""
        self._calls_in_progress += 1
        try:
            try:
                driver.drain_ready()
            except SimCrash:
                self.crash(driver.node_id, torn=False)
                return
            node = driver.node
            assert node is not None
            role_term = (node.role, node.term)
            if self._seen_roles.get(driver.node_id) != role_term:
                self._seen_roles[driver.node_id] = role_term
                self.history.record(self.clock.now_tick, "role", driver.node_id, *role_term)
            self.checker.observe_role(driver.node_id, node.role, node.term, driver.disk.current)
            if driver.node_id in self._crash_soon:
                self.crash(driver.node_id, torn=False)
        finally:
            self._calls_in_progress -= 1
        self._flush_transport_reports()

    def _flush_transport_reports(self) -> None:
        """Deliver the transport's and the peers' reports, in order, once no call is in
        progress (a report handed to a node still draining its Ready would drain it again)."""
        if self._calls_in_progress:
            return
        while self._transport_reports or self._gone_reports:
            if self._transport_reports:
                report = self._transport_reports.pop(0)
                source = self.drivers[report.source]
                if source.node is None or source.incarnation != report.source_incarnation:
                    continue
                if report.success is None:
                    source.node.report_unreachable(report.target)
                else:
                    source.node.report_snapshot(report.target, report.success)
                self._after_call(source)
                continue
            observer_id, incarnation, gone_id = self._gone_reports.pop(0)
            observer = self.drivers[observer_id]
            if observer.node is None or observer.incarnation != incarnation:
                continue
            self.history.record(self.clock.now_tick, "peer-gone", observer_id, gone_id)
            observer.node.forget_leader(gone_id)
            self._after_call(observer)

    # -- ReadyHooks ------------------------------------------------------------------------

    def persisted(self, driver: NodeDriver, ready: Ready) -> None:
        node_id = driver.node_id
        self.checker.observe_durable(node_id, driver.disk.synced)
        node = driver.node
        assert node is not None
        log = driver.disk.current
        if ready.hard_state is not None:
            hard_state = ready.hard_state
            self.checker.observe_commit(node_id, hard_state.term, hard_state.commit, log)
        if ready.committed_entries:
            last_index = ready.committed_entries[-1].index
            self.checker.observe_commit(node_id, node.term, last_index, log)

    def send(self, driver: NodeDriver, message: Message) -> None:
        now_tick = self.clock.now_tick
        if self._dies_before_sending(driver, message):
            return
        copy = driver.snapshot_copy(message) if message.type == MessageType.SNAPSHOT else None
        copies = self.network.send(message, now_tick, driver.incarnation, copy)
        if copies == 0:
            self.history.record(now_tick, "lost", *_message_fields(message))
            if message.type == MessageType.SNAPSHOT:
                self._transport_reports.append(
                    TransportReport(message.source, driver.incarnation, message.target, False)
                )
            elif message.type == MessageType.APPEND and self.network.is_blocked(
                message.source, message.target
            ):
                # A real transport notices a cut link when the send fails.
                self._transport_reports.append(
                    TransportReport(message.source, driver.incarnation, message.target, None)
                )
        if (
            message.type in (MessageType.VOTE_RESP, MessageType.APPEND_RESP)
            and not message.reject
            and self._crash_rng.random() < self.crash_after_vote_probability
        ):
            # The process dies right after this promise left: whatever it had not made
            # durable by now is lost, so a handler that sent before persisting is caught.
            self.history.record(now_tick, "crash-after-send", driver.node_id)
            raise SimCrash(f"{driver.node_id} died after sending {message.type.name}")

    def _dies_before_sending(self, driver: NodeDriver, message: Message) -> bool:
        """A leader's process dies with this APPEND (entries or a new commit) still in its send
        queue: it and everything after it are lost, and the node crashes after the call. Its
        own writes of the Ready still complete (they are not behind the queue)."""
        node = driver.node
        assert node is not None
        if driver.doomed:
            return True
        if node.role != Role.LEADER or message.type != MessageType.APPEND:
            return False
        if not message.entries and message.commit <= message.log_index:
            return False
        if self._crash_rng.random() >= self.leader_crash_before_send_probability:
            return False
        self.history.record(self.clock.now_tick, "crash-before-send", driver.node_id)
        driver.doomed = True
        self._crash_soon.add(driver.node_id)
        return True

    def applied(self, driver: NodeDriver, entry: Entry) -> None:
        node = driver.node
        assert node is not None
        self.checker.observe_apply(driver.node_id, node.term, entry)
        self.workload.observe_apply(driver.node_id, entry)

    # -- client and operator actions --------------------------------------------------------

    def propose(self, node_id: NodeId, data: bytes) -> bool:
        driver = self.drivers[node_id]
        node = driver.node
        assert node is not None
        try:
            index = driver.propose(data, self.now_ms())
        except ProposalDroppedError:
            self.history.record(self.clock.now_tick, "propose-dropped", node_id, data)
            return False
        self.workload.accepted(data, node_id, node.term, index, self.clock.now_tick)
        self.history.record(self.clock.now_tick, "propose", node_id, data, node.term, index)
        self._after_call(driver)
        return True

    def propose_conf_change(self, node_id: NodeId, change: ConfChange) -> bool:
        driver = self.drivers[node_id]
        node = driver.node
        assert node is not None
        try:
            index = node.propose_conf_change(change)
        except ProposalDroppedError:
            return False
        self.history.record(
            self.clock.now_tick, "conf-change", node_id, change.type.name, change.node_id, index
        )
        self._after_call(driver)
        return True

    def transfer_leadership(self, node_id: NodeId, target: NodeId) -> None:
        driver = self.drivers[node_id]
        assert driver.node is not None
        self.history.record(self.clock.now_tick, "transfer", node_id, target)
        driver.node.transfer_leadership(target)
        self._after_call(driver)

    def compact(self, node_id: NodeId) -> None:
        """Compact the node's log up to what it applied, durably (as the node's snapshotter)."""
        driver = self.drivers[node_id]
        assert driver.node is not None
        index = driver.applied_index
        if index <= driver.disk.current.snapshot_index:
            return
        self.history.record(self.clock.now_tick, "compact", node_id, index)
        assert driver.raft_log is not None
        # The core's membership is as of its applied index, which is where the cut is.
        driver.raft_log.compact(index, driver.node.conf_state)
        driver.raft_log.sync()
        self.checker.observe_durable(node_id, driver.disk.synced)

    def background_sync(self, node_id: NodeId) -> None:
        driver = self.drivers[node_id]
        if driver.disk.unsynced_count():
            driver.fs.write_back()
            driver.disk.sync()
            self.checker.observe_durable(node_id, driver.disk.synced)

    def partition(self, side_a: list[NodeId], side_b: list[NodeId], one_way: bool) -> None:
        self.history.record(self.clock.now_tick, "partition", tuple(side_a), tuple(side_b), one_way)
        self.network.partition(side_a, side_b, one_way)

    def heal(self) -> None:
        self.history.record(self.clock.now_tick, "heal")
        self.network.heal()

    # -- end state ---------------------------------------------------------------------------

    def describe_nodes(self) -> str:
        lines = []
        for node_id in self.node_ids:
            driver = self.drivers[node_id]
            node = driver.node
            if node is None:
                lines.append(f"  {node_id}: down, durable last {driver.disk.synced.last_index}")
                continue
            log = driver.disk.current
            lines.append(
                f"  {node_id}: {node.role.name} term={node.term} leader={node.leader} "
                f"commit={node.commit_index} applied={driver.applied_index} "
                f"last={log.last_index} snapshot={log.snapshot_index}"
            )
        return "\n".join(lines)


def _message_fields(message: Message) -> tuple[object, ...]:
    return (
        message.type.name,
        message.source,
        message.target,
        message.term,
        message.log_term,
        message.log_index,
        len(message.entries),
        message.commit,
        message.reject,
    )
