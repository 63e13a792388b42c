"""The range reader's handling of offsets retention removed while it read (OFFSET_TOO_SMALL):
failed under failOnDataLoss, otherwise skipped and counted, never past the range's end."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from raftlog.pipeline.queue_ranges import DataLossError, QueueRange
from raftlog.pipeline.range_reader import RangeReader
from raftlog.proto import client_pb2

RANGE = QueueRange("events", 2, 0, 10)
# Retention removed everything up to offset 100, far past the range's end.
TOO_SMALL = SimpleNamespace(status=client_pb2.PULL_STATUS_OFFSET_TOO_SMALL, next_queue_offset=100)


def _reader(monkeypatch: pytest.MonkeyPatch, fail_on_data_loss: bool) -> RangeReader:
    reader = RangeReader("127.0.0.1:1", fail_on_data_loss=fail_on_data_loss, timeout_s=1.0)

    def pull(queue_range: QueueRange, offset: int) -> Any:
        return TOO_SMALL

    monkeypatch.setattr(reader, "_pull", pull)
    return reader


def test_lost_offsets_are_skipped_and_counted_up_to_the_range_end(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    reader = _reader(monkeypatch, fail_on_data_loss=False)
    with caplog.at_level(logging.WARNING):
        assert list(reader.batches(RANGE)) == []
    reader.close()
    assert "events queue 2: skipped 10 offsets removed by retention" in caplog.text


def test_lost_offsets_fail_the_read_naming_the_queue_and_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reader = _reader(monkeypatch, fail_on_data_loss=True)
    with pytest.raises(DataLossError, match=r"events queue 2 offsets 0\.\.9 were removed"):
        list(reader.batches(RANGE))
    reader.close()
