import pytest

from raftlog.store.errors import InvalidQueueIdError, InvalidTopicError, UnknownTopicError
from raftlog.store.filesystem import OsFileSystem
from raftlog.store.topic_config import TopicConfig, TopicTable
from raftlog.store.validation import Limits


def test_create_list_describe_and_reload(tmp_path) -> None:
    fs = OsFileSystem()
    table = TopicTable(fs, str(tmp_path), Limits())
    assert table.create_topic("orders", 4) == TopicConfig("orders", 4)
    assert table.create_topic("orders", 4) == TopicConfig("orders", 4)
    table.create_topic("%RETRY%group|a_b-1", 1)
    table.create_topic("orders", 8)
    reloaded = TopicTable(fs, str(tmp_path), Limits())
    assert reloaded.list_topics() == [
        TopicConfig("%RETRY%group|a_b-1", 1),
        TopicConfig("orders", 8),
    ]
    assert reloaded.describe("orders").queue_count == 8
    assert reloaded.get("missing") is None
    with pytest.raises(UnknownTopicError):
        reloaded.describe("missing")


@pytest.mark.parametrize("name", ["", "a" * 128, "has space", "dot.ted", "slash/x", "é"])
def test_invalid_topic_names_refused(tmp_path, name) -> None:
    table = TopicTable(OsFileSystem(), str(tmp_path), Limits())
    with pytest.raises(InvalidTopicError):
        table.create_topic(name, 1)
    assert table.list_topics() == []


def test_queue_count_bounds_and_no_shrink(tmp_path) -> None:
    table = TopicTable(OsFileSystem(), str(tmp_path), Limits())
    for bad in (0, -1, 65537, 1.5, True, "4", None):
        with pytest.raises(InvalidQueueIdError):
            table.create_topic("t", bad)
    assert table.list_topics() == []
    table.create_topic("t", 4)
    with pytest.raises(InvalidQueueIdError):
        table.create_topic("t", 2)
    assert table.describe("t").queue_count == 4


def test_create_topics_is_all_or_nothing(tmp_path) -> None:
    fs = OsFileSystem()
    table = TopicTable(fs, str(tmp_path), Limits())
    with pytest.raises(InvalidTopicError):
        table.create_topics([("a", 1), ("bad name", 1)])
    assert table.list_topics() == []
    assert table.create_topics([("a", 1), ("b", 2)]) == [TopicConfig("a", 1), TopicConfig("b", 2)]
    assert [c.name for c in TopicTable(fs, str(tmp_path), Limits()).list_topics()] == ["a", "b"]


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        '{"version": 1}',
        '{"version": 1, "topics": [1]}',
        '{"version": 1, "topics": {"t": {"queue_count": "4"}}}',
        '{"version": 1, "topics": {"t": {"queue_count": 0}}}',
        '{"version": 1, "topics": {"bad name": {"queue_count": 1}}}',
    ],
)
def test_a_damaged_table_file_fails_the_load_naming_the_file(tmp_path, content) -> None:
    fs = OsFileSystem()
    TopicTable(fs, str(tmp_path), Limits()).create_topic("t", 1)
    (tmp_path / "config" / "topics.json").write_text(content)
    with pytest.raises(ValueError, match=r"topics\.json"):
        TopicTable(fs, str(tmp_path), Limits())
