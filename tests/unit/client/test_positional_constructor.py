"""positional_constructor builds what the class's own constructor builds, field for field,
and refuses the classes whose __init__ does more than set fields."""

from __future__ import annotations

import dataclasses

import pytest

from raftlog.client.messages import Message, OutgoingMessage, SendResult, TopicInfo
from raftlog.client.positional_constructor import positional_constructor


def distinct_values(cls: type) -> list[object]:
    """A different value per field, of the field's kind, so a swapped pair would show."""
    values: list[object] = []
    for index, field in enumerate(dataclasses.fields(cls)):
        default = field.default
        if isinstance(default, bool):
            values.append(index % 2 == 0)
        elif isinstance(default, int) or field.type in ("int",):
            values.append(1000 + index)
        elif isinstance(default, tuple):
            values.append((f"v{index}",) if "keys" in field.name else ((f"n{index}", "x"),))
        elif field.type == "bytes":
            values.append(b"body-%d" % index)
        else:
            values.append(f"s{index}")
    return values


@pytest.mark.parametrize("cls", [Message, SendResult, TopicInfo])
def test_it_builds_what_the_constructor_builds(cls: type) -> None:
    values = distinct_values(cls)
    built = positional_constructor(cls)(*values)
    expected = cls(*values)
    assert type(built) is cls
    assert built == expected and hash(built) == hash(expected) and repr(built) == repr(expected)
    for field, value in zip(dataclasses.fields(cls), values, strict=True):
        assert getattr(built, field.name) == value
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, dataclasses.fields(cls)[0].name, "other")


def test_every_field_must_be_given() -> None:
    with pytest.raises(TypeError):
        positional_constructor(TopicInfo)("only-a-name")


def test_it_refuses_a_class_with_post_init_or_without_slots() -> None:
    with pytest.raises(TypeError, match="__init__"):
        positional_constructor(OutgoingMessage)

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        name: str

    with pytest.raises(TypeError, match="slots"):
        positional_constructor(NoSlots)
