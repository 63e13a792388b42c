"""Raft's safety properties, checked on everything the simulation observes.

Rules this module keeps:
- The checker is told what happened (a role seen, a commit index persisted, an entry applied,
  a durable log changed) and raises ``SafetyViolation`` the moment a property breaks. It never
  relaxes a property to let a run pass; a run that trips it has found a bug.
- Checks are incremental (each entry is chained and compared once), so checking after every
  step costs little more than the step.
- Properties (Raft paper §5.4 and Figure 3, plus the simulation's durability rule):
  election safety: at most one leader per term, across the whole history;
  log matching: two durable logs holding an entry with the same index and term hold
  identical prefixes up to it;
  leader completeness: a leader of term T holds every entry known committed in a term < T;
  state machine safety: no two nodes apply different entries at one index, ever;
  committed never lost: every entry ever seen committed is on the durable log of a majority.
- "Known committed in term t": the term of the node that reported the commit. That is at
  least the term in which the entry really committed, so the completeness check is never
  stricter than Raft's own rule.
"""

from __future__ import annotations

from raftlog.raft.types import Entry, NodeId, Role

from .disk import LogState


class SafetyViolation(Exception):
    """A Raft safety property broke; the message names the property and the evidence."""


def describe_entry(entry: Entry | None) -> str:
    if entry is None:
        return "(missing)"
    return f"(i={entry.index} t={entry.term} {entry.type.name} {entry.data!r})"


class SafetyChecker:
    def __init__(self, voters: tuple[NodeId, ...]) -> None:
        self._voters = tuple(sorted(voters))
        self._leader_by_term: dict[int, NodeId] = {}
        self._current_leaders: dict[NodeId, tuple[int, LogState]] = {}
        # Entries known committed (index i at position i-1), who reported each, in what term.
        self.committed: list[Entry] = []
        self._committed_terms: list[int] = []
        self._committed_by: list[NodeId] = []
        self._committed_chain: list[int] = []
        # Prefix chaining: a prefix is identified by (id of prefix before, entry) -> id, so two
        # positions with equal ids hold identical prefixes, compared in O(1).
        self._chain_ids: dict[tuple[int, int, int, int, bytes], int] = {}
        self._chain_at: dict[tuple[int, int], tuple[int, NodeId]] = {}
        self._durable_chain: dict[NodeId, list[int]] = {node: [] for node in self._voters}
        self._durable_committed_prefix: dict[NodeId, int] = {node: 0 for node in self._voters}
        # Set once a property broke: the cluster may be left mid-step (a node inside a Ready),
        # so whoever drives it must stop rather than heal it.
        self.violated = False

    def _violation(self, message: str) -> SafetyViolation:
        self.violated = True
        return SafetyViolation(message)

    # -- election safety and leader completeness -------------------------------------------

    def observe_role(self, node_id: NodeId, role: Role, term: int, log: LogState) -> None:
        if role != Role.LEADER:
            self._current_leaders.pop(node_id, None)
            return
        known = self._leader_by_term.setdefault(term, node_id)
        if known != node_id:
            raise self._violation(
                f"election safety: {known} and {node_id} are both leaders of term {term}"
            )
        previous = self._current_leaders.get(node_id)
        self._current_leaders[node_id] = (term, log)
        if previous is None or previous[0] != term:
            for position, entry in enumerate(self.committed):
                if self._committed_terms[position] < term:
                    self._check_leader_has(node_id, term, log, entry, position)

    def forget_node(self, node_id: NodeId) -> None:
        """The node crashed: its volatile role is gone."""
        self._current_leaders.pop(node_id, None)

    def _check_leader_has(
        self, node_id: NodeId, term: int, log: LogState, entry: Entry, position: int
    ) -> None:
        held = log.entry_at(entry.index)
        if held != entry:
            raise self._violation(
                f"leader completeness: {node_id}, leader of term {term}, holds "
                f"{describe_entry(held)} at {entry.index} but {describe_entry(entry)} was "
                f"committed (reported by {self._committed_by[position]} in term "
                f"{self._committed_terms[position]})"
            )

    # -- commits and the state machine -----------------------------------------------------

    def observe_commit(self, node_id: NodeId, term: int, commit_index: int, log: LogState) -> None:
        """``node_id`` persisted commit index ``commit_index``: its log up to it is committed."""
        if commit_index < 1:
            return
        at_commit = log.entry_at(commit_index)
        if at_commit is None:
            raise self._violation(
                f"commit past the log: {node_id} commits {commit_index}, last {log.last_index}"
            )
        if commit_index <= len(self.committed):
            self._record_committed(node_id, term, at_commit, "commits")
            return
        for index in range(len(self.committed) + 1, commit_index + 1):
            entry = log.entry_at(index)
            assert entry is not None  # log is contiguous up to last_index
            self._record_committed(node_id, term, entry, "commits")

    def observe_apply(self, node_id: NodeId, term: int, entry: Entry) -> None:
        """``node_id`` applied ``entry`` to its state machine (or installed it by snapshot)."""
        if entry.index > len(self.committed) + 1:
            # An applied entry is committed, so everything below it is too: a node applying
            # past the known prefix must have been told commits the checker missed.
            raise self._violation(
                f"state machine safety: {node_id} applied {describe_entry(entry)} while only "
                f"{len(self.committed)} entries are known committed"
            )
        self._record_committed(node_id, term, entry, "applied")

    def _record_committed(self, node_id: NodeId, term: int, entry: Entry, how: str) -> None:
        position = entry.index - 1
        if position < len(self.committed):
            known = self.committed[position]
            if known != entry:
                raise self._violation(
                    f"state machine safety: {node_id} {how} {describe_entry(entry)} at "
                    f"{entry.index} but {describe_entry(known)} was committed there "
                    f"(reported by {self._committed_by[position]} in term "
                    f"{self._committed_terms[position]})"
                )
            return
        assert position == len(self.committed), "committed entries are recorded in order"
        previous_chain = self._committed_chain[-1] if self._committed_chain else 0
        self.committed.append(entry)
        self._committed_terms.append(term)
        self._committed_by.append(node_id)
        self._committed_chain.append(self._chain(previous_chain, entry))
        for leader, (leader_term, log) in sorted(self._current_leaders.items()):
            if leader_term > term:
                self._check_leader_has(leader, leader_term, log, entry, position)

    # -- durable logs: log matching and committed-never-lost -------------------------------

    def _chain(self, previous: int, entry: Entry) -> int:
        key = (previous, entry.index, entry.term, int(entry.type), entry.data)
        chain_id = self._chain_ids.get(key)
        if chain_id is None:
            chain_id = len(self._chain_ids) + 1
            self._chain_ids[key] = chain_id
        return chain_id

    def observe_durable(self, node_id: NodeId, durable: LogState) -> None:
        """Re-chain ``node_id``'s durable log from the lowest index that changed."""
        changed_from = durable.take_changed_from()
        if changed_from is None:
            return
        chain = self._durable_chain[node_id]
        del chain[changed_from - 1 :]
        prefix = self._durable_committed_prefix[node_id]
        self._durable_committed_prefix[node_id] = min(prefix, len(chain))
        for index in range(len(chain) + 1, durable.last_index + 1):
            entry = durable.entry_at(index)
            assert entry is not None
            chain_id = self._chain(chain[-1] if chain else 0, entry)
            chain.append(chain_id)
            seen = self._chain_at.setdefault((index, entry.term), (chain_id, node_id))
            if seen[0] != chain_id:
                raise self._violation(
                    f"log matching: durable logs of {seen[1]} and {node_id} both hold an entry "
                    f"with index {index} and term {entry.term} but their prefixes up to it differ"
                )

    def check_committed_durable(self) -> None:
        """Every committed entry is still on the durable log of a majority of voters."""
        committed_count = len(self.committed)
        prefixes: list[int] = []
        for node_id in self._voters:
            chain = self._durable_chain[node_id]
            prefix = self._durable_committed_prefix[node_id]
            limit = min(len(chain), committed_count)
            while prefix < limit and chain[prefix] == self._committed_chain[prefix]:
                prefix += 1
            self._durable_committed_prefix[node_id] = prefix
            prefixes.append(prefix)
        prefixes.sort(reverse=True)
        majority = len(self._voters) // 2 + 1
        if prefixes[majority - 1] < committed_count:
            lost_index = prefixes[majority - 1] + 1
            holders = sum(1 for prefix in prefixes if prefix >= lost_index)
            raise self._violation(
                f"committed entry lost: {describe_entry(self.committed[lost_index - 1])} is on "
                f"the durable log of only {holders} of {len(self._voters)} voters"
            )
