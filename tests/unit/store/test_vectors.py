"""tests/data/vectors.json agrees with the codecs and with docs/store-format.md's record table
(tests/data/make_vectors.py), and the check notices when either side drifts."""

from __future__ import annotations

import json

from tests.data import make_vectors


def test_committed_vectors_match_the_codecs_and_the_spec() -> None:
    assert make_vectors.check() == []


def test_a_spec_table_that_disagrees_with_the_bytes_is_reported() -> None:
    spec = make_vectors.SPEC_PATH.read_text()
    vectors = json.loads(make_vectors.VECTORS_PATH.read_text())
    doctored = spec.replace("| 6 | queue_offset | 8 |", "| 6 | queue_offset | 4 |")
    assert doctored != spec
    problems = make_vectors.spec_mismatches(doctored, vectors)
    assert any("queue_offset" in problem for problem in problems)


def test_a_vector_the_codecs_would_not_produce_is_reported() -> None:
    vectors = json.loads(make_vectors.VECTORS_PATH.read_text())
    vectors["message_record"]["fields"]["queue_offset"] = 8
    regenerated = make_vectors.regenerate(vectors)
    assert regenerated["message_record"]["hex"] != vectors["message_record"]["hex"]
    assert make_vectors.spec_mismatches(make_vectors.SPEC_PATH.read_text(), vectors)
