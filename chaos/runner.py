"""One chaos run from start to verdict: start a fresh cluster, create the topic, run the
workload and the nemesis for the duration, heal, wait until the replicas converge, read every
replica, check the history, and write the results (``raftlog chaos run``).

Files a run leaves in its data directory: ``history.jsonl`` (the operations, appended as they
happen), ``replicas.jsonl`` (the final reads), ``cluster/`` (each node's data and node.log),
and the JSON report when asked for. With ``messaging`` (delayed, ordered, transactional and
reconsume-later traffic, chaos/messaging_workload.py) also ``messaging-history.jsonl``, checked
by chaos/messaging_check.py once the consumers have drained; its anomalies make the run
invalid like the main checker's. ``raftlog chaos check`` re-checks the two .jsonl files.
Without a ``data_dir`` the run makes a new temp directory and says so; once the caller is done
with the files (the CLI draws its timeline from the history), :func:`settle_data` removes it
after a valid run unless asked to keep it, and says what became of it. A ``data_dir`` given is
never removed.

Rules this module keeps:
- The cluster is always stopped (try/finally), and the nemesis always heals first.
- The run is bounded: the workload stops at the duration, convergence and reads have their own
  timeouts, so a run lasts about duration + start-up + a minute at most.
- A run is "clean" only when the checker finds no anomaly AND nothing prevented a full check
  (a worker crashed, the replicas did not converge): a run that could not look is not valid.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raftlog.chaos.checker import Report, check
from raftlog.chaos.history import Recorder, ReplicaSnapshot, dumps_replicas, read_history
from raftlog.chaos.local_target import LocalTarget
from raftlog.chaos.messaging_check import MessagingReport, check_messaging, loads_messaging
from raftlog.chaos.messaging_workload import (
    CHAOS_NODE_ARGS,
    MessagingConfig,
    MessagingRecorder,
    MessagingWorkload,
)
from raftlog.chaos.nemesis import (
    LATENCY_LEADER,
    PARTITION_KINDS,
    PARTITION_LEADER_CLIENTS,
    PARTITION_LEADER_CONTROLLER,
    Nemesis,
    PlannedFault,
    describe,
    fault_kinds,
    plan,
)
from raftlog.chaos.target import Target, TargetError, wait_converged
from raftlog.chaos.workload import Workload, WorkloadConfig, observe_leaders_once
from raftlog.client import Admin, RaftlogError

HISTORY_FILE = "history.jsonl"
REPLICAS_FILE = "replicas.jsonl"
MESSAGING_HISTORY_FILE = "messaging-history.jsonl"
CLUSTER_DIR = "cluster"
CONVERGE_TIMEOUT_S = 60.0
_PROGRESS_INTERVAL_S = 10.0
_TOPIC_TIMEOUT_S = 30.0
_REREAD_ATTEMPTS = 5
_REREAD_PAUSE_S = 0.3


class RunError(RuntimeError):
    """The run could not be set up (bad arguments, a data directory in use...)."""


@dataclass(frozen=True, slots=True)
class RunConfig:
    """What ``raftlog chaos run`` was asked for."""

    duration_s: float = 60.0
    faults: tuple[str, ...] = ("kill", "pause")
    seed: int = 0
    data_dir: Path | None = None
    nodes: int = 3
    durability: str = "fsync"
    replication: str = "raft"  # or "master-slave": a master (master_role) and its slaves
    master_role: str = "SYNC_MASTER"
    static: bool = False  # master-slave without a controller: n1 stays the master
    partitions: bool = False  # whether a local target gets link proxies (partition, latency)
    target: str = "local"  # "local" (node processes) or "containers" (Docker)
    image: str = "raftlog:dev"  # the node image, for the containers target
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    # Delayed, ordered, transactional and reconsume-later traffic too (Raft, local target).
    messaging: MessagingConfig | None = None

    @property
    def controlled(self) -> bool:
        """A master-slave group elected and fenced by its controller members."""
        return self.replication == "master-slave" and not self.static

    @property
    def acknowledged_loss_allowed(self) -> bool:
        """An ASYNC_MASTER acknowledges before replicating: the checker counts what a
        failover takes back instead of reporting it."""
        return self.replication == "master-slave" and self.master_role == "ASYNC_MASTER"


@dataclass
class RunResult:
    """A finished run: the checker's report, the schedule, where its files are, and the
    problems that kept the run from being fully checked (each makes it invalid)."""

    config: RunConfig
    report: Report
    schedule: list[PlannedFault]
    data_dir: Path
    history_path: Path
    replicas_path: Path
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    messaging_report: MessagingReport | None = None

    @property
    def valid(self) -> bool:
        messaging_valid = self.messaging_report is None or self.messaging_report.valid
        return self.report.valid and messaging_valid and not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "seed": self.config.seed,
            "target": "local",
            "duration_s": self.config.duration_s,
            "faults": list(self.config.faults),
            "schedule": [
                {"at_s": f.at_s, "kind": f.kind, "hold_s": f.hold_s, "targets": list(f.targets)}
                for f in self.schedule
            ],
            "data_dir": str(self.data_dir),
            "history_path": str(self.history_path),
            "replicas_path": str(self.replicas_path),
            "problems": self.problems,
            "warnings": self.warnings,
            "elapsed_s": round(self.elapsed_s, 3),
            "report": self.report.to_dict(),
            "messaging_report": (
                None if self.messaging_report is None else self.messaging_report.to_dict()
            ),
        }

    def render(self) -> str:
        """The text ``raftlog chaos run`` prints after the run."""
        lines = [self.report.render().rstrip()]
        if self.messaging_report is not None:
            lines.append(self.messaging_report.render())
        lines += [f"problem: {p}" for p in self.problems]
        lines += [f"warning: {w}" for w in self.warnings]
        verdict = "VALID" if self.valid else "INVALID"
        lines.append(
            f"chaos run (seed {self.config.seed}, {self.config.duration_s:.0f} s, "
            f"faults {','.join(self.config.faults)}): {verdict} in {self.elapsed_s:.1f} s"
        )
        lines.append(f"history: {self.history_path}")
        lines.append(f"replicas: {self.replicas_path}")
        return "\n".join(lines)


def _prepare_dir(data_dir: Path | None, seed: int) -> Path:
    if data_dir is None:
        return Path(tempfile.mkdtemp(prefix=f"raftlog-chaos-{seed}-"))
    if data_dir.exists() and any(data_dir.iterdir()):
        raise RunError(f"--data-dir {data_dir} is not empty; a run needs a fresh directory")
    data_dir.mkdir(parents=True, exist_ok=True)
    return data_dir


def _create_topic(target: Target, topic: str, queue_count: int) -> None:
    deadline = time.monotonic() + _TOPIC_TIMEOUT_S
    last_error: Exception | None = None
    for _ in range(int(_TOPIC_TIMEOUT_S / 0.5) + 1):
        try:
            with target.connect() as connection, Admin(connection, timeout_s=5.0) as admin:
                admin.create_topic(topic, queue_count)
            return
        except RaftlogError as error:
            last_error = error
        if time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    raise RunError(f"could not create topic {topic!r}: {last_error}")


def make_target(config: RunConfig, data_dir: Path) -> Target:
    """The run's target: node processes under ``data_dir``, or containers of
    ``config.image`` (imported only then: it needs Docker and testcontainers)."""
    if config.target == "containers":
        try:
            from raftlog.chaos.container_target import ContainerTarget
        except ImportError as error:
            raise RunError(
                f"the containers target needs testcontainers (pip install 'raftlog[testing]'): "
                f"{error}"
            ) from None
        try:
            return ContainerTarget(
                config.image,
                config.nodes,
                durability=config.durability,
                replication=config.replication,
                master_role=config.master_role,
                controlled=config.controlled,
                log_dir=data_dir / CLUSTER_DIR,
            )
        except TargetError as error:
            raise RunError(str(error)) from None
    if config.target != "local":
        raise RunError(f"unknown target {config.target!r}: local or containers")
    return LocalTarget(
        data_dir / CLUSTER_DIR,
        config.nodes,
        durability=config.durability,
        replication=config.replication,
        master_role=config.master_role,
        controlled=config.controlled,
        partitions=config.partitions,
        extra_args=CHAOS_NODE_ARGS if config.messaging is not None else (),
    )


def _refuse_unsupported(kinds: Sequence[str], target: Target) -> None:
    """RunError for a fault kind the target cannot apply, before anything starts."""
    if any(k in PARTITION_KINDS for k in kinds) and not target.supports_partitions:
        raise RunError(f"the {target.name} target cannot partition; leave out 'partition'")
    if PARTITION_LEADER_CONTROLLER in kinds and not target.controller_ids:
        raise RunError(
            f"the {target.name} target has no controller to partition from; 'controller' "
            "needs --replication master-slave under a controller (not --static) and a "
            "target that can partition"
        )
    if PARTITION_LEADER_CLIENTS in kinds and not target.supports_client_partitions:
        raise RunError(
            f"the {target.name} target cannot cut clients off; 'clients' needs the local "
            "target with partitions"
        )
    if LATENCY_LEADER in kinds and not target.supports_latency:
        raise RunError(f"the {target.name} target cannot slow links; leave out 'latency'")


def run(
    config: RunConfig, *, out: Callable[[str], None] = print, target: Target | None = None
) -> RunResult:
    """Run one chaos run; ``out`` receives the schedule and progress lines. ``target``: an
    unstarted target to run against instead of the one ``config`` describes."""
    kinds = _checked_faults(config)
    data_dir = _prepare_dir(config.data_dir, config.seed)
    history_path = data_dir / HISTORY_FILE
    replicas_path = data_dir / REPLICAS_FILE
    target = target if target is not None else make_target(config, data_dir)
    _refuse_unsupported(kinds, target)
    schedule = plan(config.seed, config.duration_s, config.faults, target.node_ids())
    out(describe(schedule, config.seed))
    out(f"data: {data_dir}{' (a new temp directory)' if config.data_dir is None else ''}")
    started_s = time.monotonic()
    problems: list[str] = []
    warnings: list[str] = []
    recorder, replicas = Recorder(history_path), []
    messaging_path = data_dir / MESSAGING_HISTORY_FILE
    messaging_recorder = MessagingRecorder(messaging_path) if config.messaging else None
    messaging: MessagingWorkload | None = None
    try:
        out(f"starting {config.nodes} nodes ({target.name})")
        target.start()
        _create_topic(target, config.workload.topic, config.workload.queue_count)
        observe_leaders_once(target, recorder, target.node_ids())
        workload = Workload(target, recorder, config.workload)
        messaging = _messaging_workload(config, target, messaging_recorder)
        nemesis = Nemesis(target, recorder, schedule, log=lambda line: out(f"  {line}"))
        run_start_s = time.monotonic()
        out(f"running workload and nemesis for {config.duration_s:.0f} s")
        workload.start(run_start_s + config.duration_s)
        if messaging is not None:
            messaging.start(run_start_s + config.duration_s)
        nemesis.start(run_start_s)
        try:
            _wait_out(run_start_s + config.duration_s, workload, out)
        finally:
            _stop_traffic(nemesis, workload, messaging)
        if messaging is not None:
            problems += _drain(messaging, out)
        warnings += [f"nemesis: {e}" for e in nemesis.errors]
        problems += [f"workload: {e}" for e in workload.stats.errors]
        out("healed; waiting for the replicas to converge")
        replicas = _converged_replicas(config, target, recorder, problems)
    finally:
        _close(target, recorder, messaging, messaging_recorder)
    replicas_path.write_text(dumps_replicas(replicas), encoding="utf-8")
    report = check(
        read_history(history_path),
        replicas,
        acknowledged_loss_allowed=config.acknowledged_loss_allowed,
    )
    messaging_report = (
        check_messaging(loads_messaging(messaging_path.read_text(encoding="utf-8")))
        if config.messaging is not None
        else None
    )
    return RunResult(
        config=config,
        messaging_report=messaging_report,
        report=report,
        schedule=schedule,
        data_dir=data_dir,
        history_path=history_path,
        replicas_path=replicas_path,
        problems=problems,
        warnings=warnings,
        elapsed_s=time.monotonic() - started_s,
    )


def _checked_faults(config: RunConfig) -> list[str]:
    """The run's fault kinds (ValueError on an unknown name; RunError on a bad duration)."""
    kinds = fault_kinds(config.faults)
    if config.duration_s <= 0:
        raise RunError(f"duration is {config.duration_s} s; it must be positive")
    return kinds


def _stop_traffic(
    nemesis: Nemesis, workload: Workload, messaging: MessagingWorkload | None
) -> None:
    nemesis.stop()
    if messaging is not None:
        messaging.healed()  # before waiting for the workers: the time of the heal
        messaging.stop_producers()
    workload.stop()


def _drain(messaging: MessagingWorkload, out: Callable[[str], None]) -> list[str]:
    """Let the messaging consumers read what was acknowledged; the workload's problems."""
    out("draining the messaging consumers")
    if not messaging.drain():
        out(f"  still awaited after the drain: {messaging.awaited_counts()}")
    return [f"messaging workload: {e}" for e in messaging.errors]


def _close(
    target: Target,
    recorder: Recorder,
    messaging: MessagingWorkload | None,
    messaging_recorder: MessagingRecorder | None,
) -> None:
    if messaging is not None:
        messaging.drain(timeout_s=0.0)  # stops its workers (a no-op once drained)
    if messaging_recorder is not None:
        messaging_recorder.close()
    recorder.close()
    target.close()


def _messaging_workload(
    config: RunConfig, target: Target, recorder: MessagingRecorder | None
) -> MessagingWorkload | None:
    """The messaging traffic of a run with ``config.messaging`` (its topics created)."""
    if config.messaging is None or recorder is None:
        return None
    for topic in config.messaging.topics().values():
        _create_topic(target, topic, config.messaging.queue_count)
    return MessagingWorkload(target, recorder, config.messaging)


def _converged_replicas(
    config: RunConfig, target: Target, recorder: Recorder, problems: list[str]
) -> list[ReplicaSnapshot]:
    """Every replica's contents once they converged (or the wait ran out: a problem)."""
    if wait_converged(target, CONVERGE_TIMEOUT_S) is None:
        problems.append(f"replicas did not converge within {CONVERGE_TIMEOUT_S:.0f} s")
    observe_leaders_once(target, recorder, target.node_ids())
    replicas = [target.read_replica(n, config.workload.topic) for n in target.node_ids()]
    if config.messaging is not None:
        replicas = _reread_while_moving(target, config.workload.topic, replicas)
    unread = [r.node_id for r in replicas if r.commitlog_digest is None]
    if unread:
        problems.append(f"replicas not read: {', '.join(unread)}")
    return replicas


def _reread_while_moving(
    target: Target, topic: str, replicas: list[ReplicaSnapshot]
) -> list[ReplicaSnapshot]:
    """The replicas read again while their CommitLog digests differ, up to a few times.

    After transactions the leader keeps writing on its own (the check-back's progress, an
    offset commit of ``__raftlog_transaction``, every check interval), so a node read a moment
    before the others may miss that entry even though all of them had converged. A real
    divergence stays; a read racing that write does not.
    """
    for _ in range(_REREAD_ATTEMPTS):
        if len({r.commitlog_digest for r in replicas}) <= 1:
            break
        time.sleep(_REREAD_PAUSE_S)
        wait_converged(target, CONVERGE_TIMEOUT_S)
        replicas = [target.read_replica(n, topic) for n in target.node_ids()]
    return replicas


def _wait_out(deadline_s: float, workload: Workload, out: Callable[[str], None]) -> None:
    """Sleep until the deadline, printing a progress line every few seconds."""
    for _ in range(100_000):
        remaining_s = deadline_s - time.monotonic()
        if remaining_s <= 0:
            return
        time.sleep(min(_PROGRESS_INTERVAL_S, remaining_s))
        stats = workload.stats
        out(
            f"  sends ok {stats.sends_ok}, failed {stats.sends_failed}, "
            f"unknown {stats.sends_unknown}; polled {stats.polled_messages}"
        )


def write_json(result: RunResult, path: Path) -> None:
    """The run's JSON (report, schedule, file paths)."""
    path.write_text(json.dumps(result.to_dict(), indent=2, sort_keys=True), encoding="utf-8")


def _tree_size_bytes(root: Path) -> int:
    total_bytes = 0
    for folder, _, names in os.walk(root):
        for name in names:
            try:  # a file that vanished (or cannot be read) while counting adds nothing
                total_bytes += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total_bytes


def settle_data(result: RunResult, *, keep: bool = False) -> str:
    """Remove the run's data directory if the run made it (no ``data_dir`` given), the run
    is valid and ``keep`` is False; returns the line saying where the data is, or that it
    went. An invalid run's data is kept: its history and node logs are the evidence."""
    size_mb = _tree_size_bytes(result.data_dir) / 1_000_000
    where = f"{result.data_dir} ({size_mb:.1f} MB"
    if result.config.data_dir is not None:
        return f"data: {where}, in --data-dir: kept)"
    if keep or not result.valid:
        why = "--keep-data" if keep else "the run is invalid"
        return f"data: {where}, kept: {why}; remove it when done)"
    shutil.rmtree(result.data_dir, ignore_errors=True)
    return f"data: removed {where}; the run is valid; --keep-data keeps it)"
