"""The summary of a chaos soak: many ``raftlog chaos run --json`` files read back, one table
(`raftlog chaos summarize FILE...`, `make chaos-soak-ms`).

Per run: valid or not, its anomalies, its sends, and (an ASYNC_MASTER run) the acknowledged
writes a failover took back, counted, with the longest window. Over all runs: how many were
valid, the counted loss, and the failover figure: for every fault that killed the leader (the
Raft leader, or the master), the time from the kill to the first write acknowledged after it
(the checker's ``recovery_ms``); its median and maximum.

Rules this module keeps: pure (reads the JSON it is given, nothing else); a run's faults are
paired with its recoveries in schedule order, by kind.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class RunSummary:
    path: str
    seed: int
    valid: bool
    anomalies: int
    sends_ok: int
    leader_kill_recoveries_ms: tuple[float, ...]
    acked_lost: int = 0
    longest_loss_window_ms: float = 0.0


def summarize_run(path: Path) -> RunSummary:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    report = document["report"]
    recoveries = list(report.get("recoveries", []))
    leader_kills: list[float] = []
    for planned, recovered in zip(document.get("schedule", []), recoveries, strict=False):
        killed_leader = planned["kind"] == "kill" and "leader" in planned["targets"]
        if killed_leader and recovered.get("recovery_ms") is not None:
            leader_kills.append(float(recovered["recovery_ms"]))
    counts = report.get("counts", {})
    windows = [float(w["window_ms"]) for w in report.get("losses", [])]
    return RunSummary(
        path=str(path),
        seed=int(document.get("seed", 0)),
        valid=bool(document["valid"]),
        anomalies=len(report.get("anomalies", [])),
        sends_ok=int(counts.get("sends-ok", 0)),
        leader_kill_recoveries_ms=tuple(leader_kills),
        acked_lost=int(counts.get("acked-lost", 0)),
        longest_loss_window_ms=max(windows, default=0.0),
    )


def render(summaries: Sequence[RunSummary]) -> str:
    lines = [
        "| seed | valid | anomalies | sends ok | acked, then lost (longest window) "
        "| leader kill -> first ack (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for s in sorted(summaries, key=lambda summary: summary.seed):
        kills = ", ".join(f"{ms:.0f}" for ms in s.leader_kill_recoveries_ms) or "-"
        lost = f"{s.acked_lost} ({s.longest_loss_window_ms / 1000:.2f} s)" if s.acked_lost else "0"
        lines.append(
            f"| {s.seed} | {'yes' if s.valid else 'NO'} | {s.anomalies} | {s.sends_ok} | {lost} "
            f"| {kills} |"
        )
    failovers = [ms for s in summaries for ms in s.leader_kill_recoveries_ms]
    valid = sum(s.valid for s in summaries)
    lines.append("")
    lines.append(
        f"runs: {len(summaries)}, valid: {valid}, anomalies: {sum(s.anomalies for s in summaries)}"
    )
    lost_total = sum(s.acked_lost for s in summaries)
    if lost_total:
        longest_s = max(s.longest_loss_window_ms for s in summaries) / 1000
        lines.append(
            f"acknowledged, then lost (counted, ASYNC_MASTER): {lost_total} writes in "
            f"{sum(1 for s in summaries if s.acked_lost)} runs, longest window {longest_s:.2f} s"
        )
    if failovers:
        lines.append(
            f"failover (leader killed -> first acknowledged write): median "
            f"{statistics.median(failovers) / 1000:.2f} s, max {max(failovers) / 1000:.2f} s, "
            f"over {len(failovers)} kills"
        )
    else:
        lines.append("failover: no run killed the leader")
    return "\n".join(lines)
