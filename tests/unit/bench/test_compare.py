"""The side-by-side bench's arithmetic: medians over rounds, the best setting per system,
raftlog/NATS ratios, the targets' verdicts and the table (no servers: samples are given)."""

from __future__ import annotations

import pytest

from raftlog.bench.cluster import BenchError
from raftlog.bench.compare_rounds import TURN_ATTEMPTS, Recorder
from raftlog.bench.figures import Sample, evaluate_targets, render_table, summarise


def _sample(system: str, figure: str, value: float, round_index: int, **setting: object) -> Sample:
    unit = {"produce": "msgs/s", "consume": "msgs/s", "queues": "msgs/s", "failover": "s"}
    body = 100 if figure in {"failover", "queues"} else 1024
    return Sample(
        system, "fsync", figure, body, dict(setting), round_index, value, unit.get(figure, "ms")
    )


def test_produce_figure_is_the_best_settings_median_and_the_ratio_divides_medians() -> None:
    samples = [
        # raftlog window 4: median 100; window 16: median 300 (one outlier round at 10).
        _sample("raftlog", "produce", 90, 0, window=4),
        _sample("raftlog", "produce", 100, 1, window=4),
        _sample("raftlog", "produce", 500, 2, window=4),
        _sample("raftlog", "produce", 300, 0, window=16),
        _sample("raftlog", "produce", 10, 1, window=16),
        _sample("raftlog", "produce", 310, 2, window=16),
        _sample("nats", "produce", 150, 0, window=64),
        _sample("nats", "produce", 160, 1, window=64),
        _sample("nats", "produce", 140, 2, window=64),
    ]
    [figure] = summarise(samples)
    assert figure.raftlog == 300
    assert figure.raftlog_setting == {"window": 16}
    assert figure.raftlog_runs == 3
    assert figure.nats == 150
    assert figure.ratio == 2.0


def test_lower_is_better_figures_pick_the_lowest_median() -> None:
    samples = [
        _sample("raftlog", "failover", 0.8, 0),
        _sample("raftlog", "failover", 1.4, 0),
        _sample("raftlog", "failover", 0.6, 1),
        _sample("nats", "failover", 6.0, 0),
    ]
    [figure] = summarise(samples)
    assert figure.raftlog == 0.8
    assert figure.ratio is not None and abs(figure.ratio - 0.8 / 6.0) < 1e-9


def test_targets_report_met_and_missed() -> None:
    samples = [
        _sample("raftlog", "produce", 30_000, 0, window=256),
        _sample("raftlog", "produce-raw", 32_000, 0, window=16),
        _sample("nats", "produce", 2_000, 0, window=64),
        _sample("raftlog", "latency-p50", 0.9, 0),
        _sample("raftlog", "latency-p99", 7.0, 0),
        _sample("raftlog", "consume", 250_000, 0),
        _sample("raftlog", "failover", 0.07, 0),
        _sample("raftlog", "failover-pause", 2.5, 0),
        _sample("raftlog", "queues", 1_000, 0, queue_count=1),
        _sample("raftlog", "queues", 850, 0, queue_count=10_000),
    ]
    verdicts = {t["target"]: t["met"] for t in evaluate_targets(summarise(samples))}
    assert verdicts == {
        "typed produce 1024 B >= 10x NATS (fsync)": True,
        "typed produce 1024 B >= 90% of raw (fsync)": True,
        "send p50 1024 B <= 1 ms (fsync)": True,
        "send p99 1024 B <= 3 ms (fsync)": False,
        "consume 1 KiB >= 200k msgs/s": True,
        "leader killed: first ack <= 0.1 s": True,
        "leader frozen: first ack <= 1.5 s": False,
        "10,000 queues >= 90% of 1 queue": False,
    }
    # The write pairing has its own bars: >= 1x NATS, p50 <= 0.7 ms.
    write = [
        Sample("raftlog", "write", "produce", 100, {}, 0, 2_500, "msgs/s"),
        Sample("nats", "write", "produce", 100, {}, 0, 2_000, "msgs/s"),
        Sample("raftlog", "write", "latency-p50", 100, {}, 0, 0.8, "ms"),
    ]
    verdicts = {t["target"]: t["met"] for t in evaluate_targets(summarise(write))}
    assert verdicts == {
        "typed produce 100 B >= 1x NATS (write)": True,
        "send p50 100 B <= 0.7 ms (write)": False,
    }


def test_table_has_a_row_per_figure_with_both_systems_and_the_ratio() -> None:
    samples = [
        _sample("raftlog", "produce", 4_000, 0, window=16),
        _sample("nats", "produce", 2_000, 0, window=64),
        _sample("raftlog", "queues", 1_000, 0, queue_count=10_000),
    ]
    table = render_table(
        summarise(samples), {"fsync": "nats-server 2.10.27, sync_interval: always"}
    )
    rows = table.splitlines()[2:]
    assert len(rows) == 2
    assert "| 4,000 | 2,000 | 2.00 |" in rows[0]
    assert "sync_interval: always" in rows[0]
    assert rows[1].startswith("| produce, 10,000 queues |")
    assert "| 1,000 | - | - |" in rows[1]


def test_master_slave_modes_are_columns_beside_raft_with_their_targets() -> None:
    samples = [
        _sample("raftlog", "produce", 1_000, 0, window=16),
        _sample("raftlog:sync-master", "produce", 1_100, 0, window=16),
        _sample("raftlog:async-master", "produce", 1_200, 0, window=16),
        _sample("nats", "produce", 500, 0, window=64),
    ]
    [figure] = summarise(samples)
    assert figure.raftlog == 1_000 and figure.ratio == 2.0  # Raft mode stays the headline
    assert figure.modes == {"sync-master": 1_100, "async-master": 1_200}
    verdicts = {t["target"]: t["met"] for t in evaluate_targets([figure])}
    assert verdicts["sync-master produce 1024 B >= 1x raft"] is True
    assert verdicts["async-master produce 1024 B >= 1.5x raft"] is False
    header, _, row = render_table([figure], {}).splitlines()
    assert header.endswith("| raftlog sync-master | raftlog async-master |")
    assert row.endswith("| 1,100 | 1,200 |")


def test_a_failed_turn_is_retried_and_only_the_successful_attempts_samples_count() -> None:
    recorder = Recorder()
    attempts: list[int] = []

    def turn() -> None:
        attempts.append(1)
        recorder.add(_sample("raftlog", "failover", float(len(attempts)), 0))
        if len(attempts) == 1:
            raise BenchError("not leader")

    recorder.attempt("round 0 raftlog / fsync", turn)
    assert [s.value for s in recorder.samples] == [2.0]
    assert len(recorder.warnings) == 1 and "not leader" in recorder.warnings[0]


def test_a_turn_that_keeps_failing_raises_after_the_last_attempt() -> None:
    recorder = Recorder()

    def turn() -> None:
        recorder.add(_sample("nats", "failover", 1.0, 0))
        raise BenchError("no leader")

    with pytest.raises(BenchError, match="no leader"):
        recorder.attempt("round 0 nats / fsync", turn)
    assert recorder.samples == []
    assert len(recorder.warnings) == TURN_ATTEMPTS - 1
