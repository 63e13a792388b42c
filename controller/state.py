"""ControllerState: what the controller decides for each broker group, as a pure state machine
(the pysyncobj member applies its commands in log order on every controller member).

Per group: the members (node id -> address), the master, the master epoch and the in-sync
set. Commands return a ``Verdict`` (applied, or refused with the reason); a refused command
changes nothing.

Rules this module keeps:
- Pure and deterministic: no clock, no I/O, no randomness; the same commands in the same order
  give the same state on every member.
- A master is elected only from the in-sync set (never "unclean"), and every election bumps
  the epoch; an election that names a stale epoch is refused (two leading members racing
  cannot both win).
- Only the master of the current epoch changes its in-sync set, and it stays in it.
- The first master of a group (no in-sync set yet) is the broker with the largest CommitLog.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    members: dict[str, str] = field(default_factory=dict)
    master_id: str | None = None
    epoch: int = 0
    in_sync: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Verdict:
    applied: bool
    reason: str = ""


OK = Verdict(True)


class ControllerState:
    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}

    def group(self, name: str) -> Group:
        return self.groups.get(name) or Group(name)

    def register(self, name: str, node_id: str, address: str) -> Verdict:
        """A broker of group ``name`` is reachable at ``address``."""
        group = self.group(name)
        if group.members.get(node_id) == address:
            return OK
        self.groups[name] = replace(group, members={**group.members, node_id: address})
        return OK

    def elect(self, name: str, candidate: str, expected_epoch: int) -> Verdict:
        """Make ``candidate`` the master of epoch ``expected_epoch + 1``."""
        group = self.group(name)
        if group.epoch != expected_epoch:
            return Verdict(False, f"epoch is {group.epoch}, not {expected_epoch}")
        if candidate not in group.members:
            return Verdict(False, f"{candidate} is not a member of {name}")
        if group.in_sync and candidate not in group.in_sync:
            return Verdict(False, f"{candidate} is not in the in-sync set")
        self.groups[name] = replace(
            group, master_id=candidate, epoch=group.epoch + 1, in_sync=frozenset({candidate})
        )
        return OK

    def renew(self, name: str, master_id: str) -> Verdict:
        """A master's lease renewal: changes nothing, but is committed like any command, so
        only a member that still leads the controller group can grant a lease."""
        group = self.group(name)
        if group.master_id != master_id:
            return Verdict(False, f"{master_id} is not the master of {name}")
        return OK

    def alter_in_sync(
        self, name: str, master_id: str, epoch: int, in_sync: frozenset[str]
    ) -> Verdict:
        group = self.group(name)
        if group.master_id != master_id or group.epoch != epoch:
            return Verdict(
                False,
                f"{master_id} is not the master of epoch {epoch} (the master is "
                f"{group.master_id} of epoch {group.epoch})",
            )
        if master_id not in in_sync:
            return Verdict(False, "the master must stay in its in-sync set")
        unknown = sorted(in_sync - set(group.members))
        if unknown:
            return Verdict(False, f"not members of {name}: {', '.join(unknown)}")
        self.groups[name] = replace(group, in_sync=in_sync)
        return OK


def choose_master(group: Group, alive: dict[str, int]) -> str | None:
    """Who a leading member elects when the group needs a master: among the alive brokers
    (node id -> reported CommitLog end) that may be elected (the in-sync set, or anyone for
    a group that never had a master), the one with the largest log; ties by node id."""
    eligible = group.in_sync if group.in_sync else frozenset(group.members)
    candidates = [(offset, node_id) for node_id, offset in alive.items() if node_id in eligible]
    if not candidates:
        return None
    return min(candidates, key=lambda item: (-item[0], item[1]))[1]
