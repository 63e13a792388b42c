import pytest

from raftlog.store.hashing import key_hash, tag_hash
from tests.support import load_vectors

VECTORS = load_vectors()["hashes"]


@pytest.mark.parametrize(("tag", "expected"), sorted(VECTORS["tag_hash"].items()))
def test_tag_hash_matches_vector(tag: str, expected: int) -> None:
    assert tag_hash(tag) == expected


@pytest.mark.parametrize(("joined", "expected"), sorted(VECTORS["key_hash"].items()))
def test_key_hash_matches_vector(joined: str, expected: int) -> None:
    topic, key = joined.split("#", 1)
    assert key_hash(topic, key) == expected


def test_key_hash_is_non_negative_31_bit() -> None:
    for i in range(1000):
        assert 0 <= key_hash("t", f"key-{i}") <= 0x7FFFFFFF
