"""Raft: the role logic of one replica (follower, pre-candidate, candidate, leader).

``RawNode`` wraps this class and is the public entry; this class is driven by ``tick``,
``step`` and the leader's proposal methods, and leaves its output in ``msgs``,
``read_states`` and the log's unstable tail for ``RawNode.ready()`` to collect.

Rules this module keeps:
- Pure: no clock, no I/O, randomness only from the injected ``random.Random``.
- Every loop over node ids goes over a sorted tuple, never over a set or dict.
- Term and vote change only through ``_reset``/``_become_*`` and the vote grant; they reach
  the application through ``hard_state()`` in the next Ready, persisted before any message.
- The leader counts its own copy of an entry toward commit only once the application reported
  it durable (``on_stable``), and commits by counting only entries of its own term (Raft §5.4.2).
- Membership changes take effect when their entry is applied (``apply_conf_change``), one at a
  time, and a leader proposes one only after it has committed an entry of its own term.
- Stale, duplicate or unknown messages are dropped, never raised on.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from raftlog.raft.config import Config
from raftlog.raft.membership import apply_change, refusal
from raftlog.raft.progress import Progress, ProgressState
from raftlog.raft.quorum import VoteResult, committed_index, vote_result
from raftlog.raft.raft_log import RaftLog
from raftlog.raft.read_only import ReadOnly
from raftlog.raft.types import (
    ConfChange,
    ConfState,
    Entry,
    EntryType,
    HardState,
    LogCompactedError,
    LogStorage,
    Message,
    MessageType,
    NodeId,
    PlantedBug,
    ProposalDroppedError,
    ReadState,
    Role,
    SnapshotMeta,
)

TRANSFER_CONTEXT = b"transfer"
"""VOTE/TIMEOUT_NOW context of a campaign caused by leadership transfer."""

_RESPONSE_TYPE = {
    MessageType.VOTE: MessageType.VOTE_RESP,
    MessageType.PRE_VOTE: MessageType.PRE_VOTE_RESP,
}


class Raft:
    def __init__(self, config: Config, storage: LogStorage, rng: random.Random) -> None:
        self.id = config.node_id
        self.config = config
        self._rng = rng
        self._bugs = config.planted_bugs
        self.log = RaftLog(storage)
        hard_state, conf_state = storage.initial_state()
        self.term = hard_state.term
        self.vote = hard_state.vote
        self.role = Role.FOLLOWER
        self.leader: NodeId | None = None
        self.voters: tuple[NodeId, ...] = tuple(sorted(conf_state.voters))
        self.learners: tuple[NodeId, ...] = tuple(sorted(conf_state.learners))
        self.conf_index = self.log.first_index() - 1
        """The log index the membership above reflects."""
        self.progress: dict[NodeId, Progress] = {}
        self.departing: dict[NodeId, tuple[int, int]] = {}
        """Leader: removed members still being told of their removal -> (the removal's log
        index, ticks left); their ``progress`` stays until the ticks run out."""
        self.votes: dict[NodeId, bool] = {}
        self.msgs: list[Message] = []
        self.read_states: list[ReadState] = []
        self.read_only = ReadOnly()
        self.pending_reads: list[tuple[NodeId, bytes]] = []
        """Leader: reads that arrived before it committed an entry of its term."""
        self.election_elapsed_ticks = 0
        self.heartbeat_elapsed_ticks = 0
        self.randomized_election_ticks = config.election_ticks
        self.lead_transferee: NodeId | None = None
        self.pending_conf_index = 0
        self.uncommitted_bytes = 0
        self.broadcast_pending = False
        self._broadcast_if_empty = False
        self._commit_unannounced = False

        applied_index = max(config.applied_index, self.log.first_index() - 1)
        # Entries the application applied were committed, even if the commit index (which is
        # written without fsync) did not survive the crash.
        commit_index = max(hard_state.commit, applied_index)
        assert commit_index <= self.log.last_index(), "committed entries missing from the log"
        self.log.commit_to(commit_index)
        known = config.applied_conf_state
        if known is not None and applied_index == config.applied_index > self.conf_index:
            # The application kept the membership as of its applied index: nothing to read.
            self.voters = tuple(sorted(known.voters))
            self.learners = tuple(sorted(known.learners))
            self.conf_index = applied_index
        self._replay_conf_changes(applied_index)
        self.log.applied_to(applied_index)
        self._become_follower(self.term, None)

    # --- membership ------------------------------------------------------------------------

    def _replay_conf_changes(self, applied_index: int) -> None:
        """Bring the membership from the snapshot point up to ``applied_index`` by applying
        the configuration entries stored in between (a restart)."""
        for entry in self._entries_between(self.conf_index + 1, applied_index):
            if entry.type == EntryType.CONF_CHANGE:
                self.apply_conf_change(entry)
        self.conf_index = max(self.conf_index, applied_index)

    def _entries_between(self, low: int, high: int) -> Iterator[Entry]:
        """Entries [low, high] of the log, read in batches of bounded size."""
        while low <= high:
            batch = self.log.slice(low, high + 1, self.config.max_committed_bytes_per_ready)
            yield from batch
            low = batch[-1].index + 1

    def members(self) -> tuple[NodeId, ...]:
        return tuple(sorted(self.voters + self.learners))

    def _is_stranger(self, node_id: NodeId) -> bool:
        """Not in our membership, which we do have (a node that knows no membership yet -- a
        joining learner -- knows no strangers)."""
        return bool(self.voters or self.learners) and node_id not in self.members()

    def promotable(self) -> bool:
        return self.id in self.voters

    def conf_state(self) -> ConfState:
        return ConfState(voters=self.voters, learners=self.learners)

    def apply_conf_change(self, entry: Entry) -> None:
        """The configuration entry ``entry`` is being applied: the membership changes now."""
        assert entry.type == EntryType.CONF_CHANGE
        if entry.index <= self.conf_index:
            return  # already reflected (e.g. by a snapshot restored meanwhile)
        self.conf_index = entry.index
        try:
            change = ConfChange.decode(entry.data)
        except ValueError:
            return  # a malformed entry changes nothing, everywhere alike
        conf_state = apply_change(self.conf_state(), change)
        self.voters, self.learners = conf_state.voters, conf_state.learners
        if self.role == Role.LEADER:
            self._leader_apply_membership()
        elif self.role != Role.FOLLOWER and not self.promotable():
            self._become_follower(self.term, None)  # no longer a voter: stop campaigning

    def _leader_apply_membership(self) -> None:
        if self.id not in self.voters:
            # Removed (or demoted) leader: the change is committed, so step down and let the
            # remaining voters elect a leader among themselves.
            self._become_follower(self.term, None)
            return
        for node_id in self.members():
            self.departing.pop(node_id, None)  # removed and added again
            if node_id not in self.progress:
                self.progress[node_id] = Progress(
                    self.log.last_index() + 1, self.config.max_inflight_appends, False
                )
            self.progress[node_id].is_learner = node_id in self.learners
        members = self.members()
        for node_id in sorted(self.progress):
            if node_id not in members and node_id not in self.departing:
                # Farewells for two election timeouts: the removed node gets its removal entry
                # and a commit index covering it, so it applies the removal and stops
                # campaigning. A single message could be lost, or find it behind.
                self.departing[node_id] = (self.conf_index, 2 * self.config.election_ticks)
                self._say_farewell(node_id)
        if self.lead_transferee is not None and self.lead_transferee not in self.voters:
            self.lead_transferee = None
        # A smaller quorum may commit more right away.
        if self._maybe_commit():
            self._broadcast_append()

    # --- state transitions -----------------------------------------------------------------

    def hard_state(self) -> HardState:
        vote = self.vote
        if PlantedBug.VOTE_NOT_PERSISTED in self._bugs:
            vote = None  # planted bug: the vote never reaches stable storage
        return HardState(term=self.term, vote=vote, commit=self.log.committed)

    def _reset(self, term: int) -> None:
        if term != self.term:
            self.term = term
            self.vote = None
        self.leader = None
        self.election_elapsed_ticks = 0
        self.heartbeat_elapsed_ticks = 0
        self.randomized_election_ticks = self.config.election_ticks + self._rng.randrange(
            self.config.election_ticks
        )
        self.lead_transferee = None
        self.votes = {}
        self.progress = {}
        self.departing = {}
        self.read_only.reset()
        self.pending_reads = []
        self.pending_conf_index = 0
        self.uncommitted_bytes = 0
        self.broadcast_pending = False
        self._broadcast_if_empty = False
        self._commit_unannounced = False

    def _become_follower(self, term: int, leader: NodeId | None) -> None:
        self._reset(term)
        self.role = Role.FOLLOWER
        self.leader = leader

    def _become_pre_candidate(self) -> None:
        # Pre-vote changes neither term nor vote (Raft thesis §9.6).
        self.role = Role.PRE_CANDIDATE
        self.votes = {}
        self.leader = None

    def _become_candidate(self) -> None:
        self._reset(self.term + 1)
        self.vote = self.id
        self.role = Role.CANDIDATE

    def _become_leader(self) -> None:
        assert self.role == Role.CANDIDATE
        self._reset(self.term)
        self.role = Role.LEADER
        self.leader = self.id
        last_index = self.log.last_index()
        for node_id in self.members():
            self.progress[node_id] = Progress(
                last_index + 1, self.config.max_inflight_appends, node_id in self.learners
            )
        own = self.progress[self.id]
        own.maybe_update(self.log.last_stable_index())
        own.become_replicate()
        own.recent_active = True
        # Entries before the no-op may hide an unapplied configuration change: no new change
        # until all of them are applied.
        self.pending_conf_index = last_index
        # The no-op lets the new leader commit (and so learn the commit index) in its term.
        self.log.append([Entry(last_index + 1, self.term, EntryType.NORMAL, b"")])

    # --- elections -------------------------------------------------------------------------

    def _has_unapplied_conf_change(self) -> bool:
        low = max(self.log.applied + 1, self.log.first_index())
        return any(
            entry.type == EntryType.CONF_CHANGE
            for entry in self._entries_between(low, self.log.committed)
        )

    def campaign(self, transfer: bool) -> None:
        """Start an election: first a pre-vote round unless it is disabled or this campaign
        is a leadership transfer (TIMEOUT_NOW)."""
        if self.role == Role.LEADER or not self.promotable():
            return
        if self._has_unapplied_conf_change():
            # Our membership is about to change; campaigning on the old one is unsafe.
            return
        if self.config.pre_vote and not transfer:
            self._become_pre_candidate()
            self._request_votes(MessageType.PRE_VOTE, b"")
        else:
            self._start_election(transfer)

    def _start_election(self, transfer: bool) -> None:
        self._become_candidate()
        self._request_votes(MessageType.VOTE, TRANSFER_CONTEXT if transfer else b"")

    def _request_votes(self, vote_type: MessageType, context: bytes) -> None:
        # A pre-vote asks "would you vote for me in the next term?" without moving to it.
        vote_term = self.term + 1 if vote_type == MessageType.PRE_VOTE else self.term
        if self._poll(self.id, True) == VoteResult.WON:
            self._on_election_won()  # a single voter wins at once
            return
        for voter in self.voters:
            if voter != self.id:
                self._send(
                    vote_type,
                    voter,
                    term=vote_term,
                    log_index=self.log.last_index(),
                    log_term=self.log.last_term(),
                    context=context,
                )

    def _on_election_won(self) -> None:
        if not self.promotable():
            self._become_follower(self.term, None)
        elif self.role == Role.PRE_CANDIDATE:
            self._start_election(transfer=False)
        else:
            self._become_leader()
            self._broadcast_append()

    def _poll(self, node_id: NodeId, granted: bool) -> VoteResult:
        self.votes.setdefault(node_id, granted)
        return vote_result(self.voters, self.votes)

    # --- ticks -----------------------------------------------------------------------------

    def tick(self) -> None:
        if self.role == Role.LEADER:
            self._tick_heartbeat()
        else:
            self._tick_election()

    def _tick_election(self) -> None:
        self.election_elapsed_ticks += 1
        if self.promotable() and self.election_elapsed_ticks >= self.randomized_election_ticks:
            self.election_elapsed_ticks = 0
            self.campaign(transfer=False)

    def _tick_heartbeat(self) -> None:
        self.heartbeat_elapsed_ticks += 1
        self.election_elapsed_ticks += 1
        if self._commit_unannounced:
            self._commit_unannounced = False
            self._broadcast_append()
        if self.election_elapsed_ticks >= self.config.election_ticks:
            self.election_elapsed_ticks = 0
            preferred_leader = self._caught_up_preferred_leader()
            if self.config.check_quorum and not self._check_quorum_active():
                self._become_follower(self.term, None)
                return
            if self.lead_transferee is not None:
                self.lead_transferee = None  # the transfer timed out: take proposals again
            elif preferred_leader is not None:
                # At most one attempt per two election timeouts, so an unreachable preferred
                # node cannot keep proposals blocked.
                self.transfer_leadership(preferred_leader)
        if self.heartbeat_elapsed_ticks >= self.config.heartbeat_ticks:
            self.heartbeat_elapsed_ticks = 0
            self._broadcast_heartbeat(self.read_only.last_pending_context() or b"")
            for node_id in sorted(self.departing):
                self._say_farewell(node_id)
        self._tick_departures()

    def _tick_departures(self) -> None:
        for node_id in sorted(self.departing):
            removal_index, ticks_left = self.departing[node_id]
            if ticks_left <= 1:
                del self.departing[node_id]
                del self.progress[node_id]  # it hears nothing from this leader again
            else:
                self.departing[node_id] = (removal_index, ticks_left - 1)

    def _say_farewell(self, node_id: NodeId) -> None:
        """Tell the removed ``node_id`` of its removal: the entry if it lacks it, and a
        heartbeat whose commit index covers what it stores (its answer also resumes a paused
        probe)."""
        progress = self.progress[node_id]
        if progress.match_index < self.departing[node_id][0]:
            self._send_append(node_id)
        commit = min(progress.match_index, self.log.committed)
        self._send(MessageType.HEARTBEAT, node_id, commit=commit)

    def _check_quorum_active(self) -> bool:
        """Did a majority of voters (counting us) answer since the last round? Resets the
        marks for the next round."""
        active = {node_id: True for node_id in self.voters if self._recently_active(node_id)}
        for node_id in sorted(self.progress):
            if node_id != self.id:
                self.progress[node_id].recent_active = False
        return vote_result(self.voters, active) == VoteResult.WON

    def _recently_active(self, node_id: NodeId) -> bool:
        progress = self.progress.get(node_id)
        return node_id == self.id or (progress is not None and progress.recent_active)

    def _caught_up_preferred_leader(self) -> NodeId | None:
        """Config.preferred_leader, if it is another live voter holding our whole log."""
        preferred = self.config.preferred_leader
        if preferred is None or preferred == self.id or preferred not in self.voters:
            return None
        progress = self.progress[preferred]
        if progress.recent_active and progress.match_index == self.log.last_index():
            return preferred
        return None

    # --- step ------------------------------------------------------------------------------

    def step(self, m: Message) -> None:
        if m.target != self.id or m.source == self.id:
            return
        if m.type in (MessageType.VOTE, MessageType.PRE_VOTE) and self._is_stranger(m.source):
            # A removed node that has not applied its removal may still campaign; ignoring it
            # (before looking at its term) keeps it from ever moving the cluster's term.
            return
        if m.term > self.term:
            if m.type in (MessageType.VOTE, MessageType.PRE_VOTE):
                in_lease = (
                    self.config.check_quorum
                    and self.leader is not None
                    and self.election_elapsed_ticks < self.config.election_ticks
                )
                if in_lease and m.context != TRANSFER_CONTEXT:
                    # A live leader exists: a disruptive (pre)candidate is ignored (§4.2.3).
                    return
            if m.type == MessageType.PRE_VOTE:
                pass  # never change term because of a pre-vote
            elif m.type == MessageType.PRE_VOTE_RESP and not m.reject:
                pass  # our term changes when the pre-vote is won
            elif m.type in (MessageType.APPEND, MessageType.HEARTBEAT, MessageType.SNAPSHOT):
                self._become_follower(m.term, m.source)
            else:
                self._become_follower(m.term, None)
        elif m.term < self.term:
            if (self.config.check_quorum or self.config.pre_vote) and m.type in (
                MessageType.APPEND,
                MessageType.HEARTBEAT,
            ):
                # A stale leader (e.g. back from a partition) learns the newer term from this.
                self._send(MessageType.APPEND_RESP, m.source)
            elif m.type == MessageType.PRE_VOTE:
                self._send(MessageType.PRE_VOTE_RESP, m.source, reject=True)
            return

        if m.type in (MessageType.VOTE, MessageType.PRE_VOTE):
            self._handle_vote_request(m)
        elif self.role == Role.LEADER:
            self._step_leader(m)
        elif self.role in (Role.CANDIDATE, Role.PRE_CANDIDATE):
            self._step_candidate(m)
        else:
            self._step_follower(m)

    def _handle_vote_request(self, m: Message) -> None:
        can_vote = (
            self.vote == m.source
            or (self.vote is None and self.leader is None)
            or (m.type == MessageType.PRE_VOTE and m.term > self.term)
        )
        response_type = _RESPONSE_TYPE[m.type]
        if can_vote and self.log.is_up_to_date(m.log_index, m.log_term):
            # The response carries the request's term: a granted pre-vote must not look stale.
            self._send(response_type, m.source, term=m.term)
            if m.type == MessageType.VOTE:
                self.election_elapsed_ticks = 0
                self.vote = m.source
        else:
            self._send(response_type, m.source, reject=True)

    def _step_candidate(self, m: Message) -> None:
        if m.type in (MessageType.APPEND, MessageType.HEARTBEAT, MessageType.SNAPSHOT):
            # A leader of our term exists (§5.2): stand down.
            self._become_follower(m.term, m.source)
            self._step_follower(m)
            return
        expected = (
            MessageType.PRE_VOTE_RESP if self.role == Role.PRE_CANDIDATE else MessageType.VOTE_RESP
        )
        if m.type != expected:
            return
        result = self._poll(m.source, not m.reject)
        if result == VoteResult.WON:
            self._on_election_won()
        elif result == VoteResult.LOST:
            self._become_follower(self.term, None)

    def _step_follower(self, m: Message) -> None:
        if m.type == MessageType.APPEND:
            self.election_elapsed_ticks = 0
            self.leader = m.source
            self._handle_append(m)
        elif m.type == MessageType.HEARTBEAT:
            self.election_elapsed_ticks = 0
            self.leader = m.source
            self.log.commit_to(m.commit)
            self._send(MessageType.HEARTBEAT_RESP, m.source, context=m.context)
        elif m.type == MessageType.SNAPSHOT:
            self.election_elapsed_ticks = 0
            self.leader = m.source
            self._handle_snapshot(m)
        elif m.type == MessageType.TIMEOUT_NOW:
            self.campaign(transfer=True)
        elif m.type == MessageType.READ_INDEX_RESP:
            self.read_states.append(ReadState(m.log_index, m.context))

    def _handle_append(self, m: Message) -> None:
        if m.log_index < self.log.committed:
            # Everything up to our commit index matches; say so, so the leader skips ahead.
            self._send(MessageType.APPEND_RESP, m.source, log_index=self.log.committed)
            return
        last_new_index = self.log.maybe_append(
            m.log_index,
            m.log_term,
            m.commit,
            m.entries,
            skip_matching_check=PlantedBug.SKIP_LOG_MATCHING_CHECK in self._bugs,
        )
        if last_new_index is not None:
            self._send(MessageType.APPEND_RESP, m.source, log_index=last_new_index)
            return
        # Fast backtracking: point the leader at the last entry that may match, skipping
        # whole terms at once instead of one index per round trip.
        hint_index, hint_term = self.log.find_conflict_by_term(m.log_index, m.log_term)
        self._send(
            MessageType.APPEND_RESP,
            m.source,
            log_index=m.log_index,
            reject=True,
            reject_hint=hint_index,
            hint_term=hint_term,
        )

    def _handle_snapshot(self, m: Message) -> None:
        snapshot = m.snapshot
        if snapshot is None:
            return
        if snapshot.index <= self.log.committed:
            self._send(MessageType.APPEND_RESP, m.source, log_index=self.log.committed)
            return
        if self.log.match_term(snapshot.index, snapshot.term):
            # We already hold the snapshot point: just learn that it is committed.
            self.log.commit_to(snapshot.index)
        else:
            self.log.restore(snapshot)
            self.voters = tuple(sorted(snapshot.conf_state.voters))
            self.learners = tuple(sorted(snapshot.conf_state.learners))
            self.conf_index = snapshot.index
        self._send(MessageType.APPEND_RESP, m.source, log_index=snapshot.index)

    # --- leader ----------------------------------------------------------------------------

    def _step_leader(self, m: Message) -> None:
        if m.type == MessageType.READ_INDEX:
            self.read_index(m.source, m.context)
            return
        progress = self.progress.get(m.source)
        if progress is None:
            return  # not (or no longer) a member
        if m.type == MessageType.APPEND_RESP:
            progress.recent_active = True
            self._handle_append_response(m, progress)
        elif m.type == MessageType.HEARTBEAT_RESP:
            progress.recent_active = True
            self._handle_heartbeat_response(m, progress)

    def _handle_append_response(self, m: Message, progress: Progress) -> None:
        if m.reject:
            match_hint_index = m.reject_hint
            if m.hint_term > 0:
                match_hint_index, _ = self.log.find_conflict_by_term(m.reject_hint, m.hint_term)
            if progress.maybe_decrease_to(m.log_index, match_hint_index):
                if progress.state == ProgressState.REPLICATE:
                    progress.become_probe()
                self._send_append(m.source)
            return
        was_paused = progress.is_paused()
        if not progress.maybe_update(m.log_index):
            return
        if progress.state == ProgressState.PROBE:
            progress.become_replicate()
        elif (
            progress.state == ProgressState.SNAPSHOT
            and progress.match_index >= progress.pending_snapshot_index
        ):
            progress.become_probe()
            progress.become_replicate()
        elif progress.state == ProgressState.REPLICATE:
            progress.inflights.free_le(m.log_index)
        if self._maybe_commit():
            self._announce_commit()
        elif was_paused:
            self._send_append(m.source)
        # Fill the inflight window while there is something to send.
        while self._send_append(m.source, send_if_empty=False):
            pass
        if m.source == self.lead_transferee and progress.match_index == self.log.last_index():
            self._send(MessageType.TIMEOUT_NOW, m.source)

    def _handle_heartbeat_response(self, m: Message, progress: Progress) -> None:
        progress.probe_sent = False
        if progress.state == ProgressState.REPLICATE and progress.inflights.full():
            # An acknowledgement may have been lost; let one more APPEND out.
            progress.inflights.free_first_one()
        if progress.match_index < self.log.last_index():
            self._send_append(m.source)
        if not m.context:
            return
        acks = self.read_only.receive_ack(m.source, m.context)
        if acks is None:
            return
        if vote_result(self.voters, dict.fromkeys(acks, True)) != VoteResult.WON:
            return
        for request in self.read_only.advance(m.context):
            self._answer_read(request.requester, request.read_index, request.context)

    def _maybe_commit(self) -> bool:
        match_indexes = {node_id: pr.match_index for node_id, pr in self.progress.items()}
        index = committed_index(self.voters, match_indexes)
        if index <= self.log.committed:
            return False
        if PlantedBug.COMMIT_PREVIOUS_TERM_BY_COUNTING in self._bugs:
            self.log.commit_to(index)  # planted bug: any majority-stored index, any term
        elif self.log.term_or_zero(index) == self.term:
            self.log.commit_to(index)  # Raft §5.4.2: only current-term entries by counting
        else:
            return False
        self._release_pending_reads()
        return True

    def committed_in_current_term(self) -> bool:
        return self.log.term_or_zero(self.log.committed) == self.term

    def _send(
        self,
        message_type: MessageType,
        target: NodeId,
        *,
        term: int | None = None,
        log_term: int = 0,
        log_index: int = 0,
        entries: tuple[Entry, ...] = (),
        commit: int = 0,
        reject: bool = False,
        reject_hint: int = 0,
        hint_term: int = 0,
        snapshot: SnapshotMeta | None = None,
        context: bytes = b"",
    ) -> None:
        self.msgs.append(
            Message(
                type=message_type,
                source=self.id,
                target=target,
                term=self.term if term is None else term,
                log_term=log_term,
                log_index=log_index,
                entries=entries,
                commit=commit,
                reject=reject,
                reject_hint=reject_hint,
                hint_term=hint_term,
                snapshot=snapshot,
                context=context,
            )
        )

    def _send_append(self, target: NodeId, send_if_empty: bool = True) -> bool:
        """Send ``target`` the entries it needs next (or a snapshot); False if nothing was
        sent (paused, or nothing new and ``send_if_empty`` is false)."""
        progress = self.progress[target]
        if progress.is_paused():
            return False
        prev_index = progress.next_index - 1
        try:
            prev_term = self.log.term(prev_index)
            entries = self.log.entries_from(progress.next_index, self.config.max_append_bytes)
        except LogCompactedError:
            return self._send_snapshot(target, progress)
        if not entries and not send_if_empty:
            return False
        self._send(
            MessageType.APPEND,
            target,
            log_index=prev_index,
            log_term=prev_term,
            entries=tuple(entries),
            commit=self.log.committed,
        )
        if entries:
            progress.sent_entries(entries[-1].index)
        return True

    def _send_snapshot(self, target: NodeId, progress: Progress) -> bool:
        if target in self.departing:
            return False  # a removed node is told of its removal, never sent a snapshot
        if not progress.recent_active:
            # Don't ship a snapshot to a node that may be down; a heartbeat answer revives it.
            return False
        snapshot = self.log.snapshot()
        self._send(MessageType.SNAPSHOT, target, snapshot=snapshot)
        progress.become_snapshot(snapshot.index)
        return True

    def _broadcast_append(self, send_if_empty: bool = True) -> None:
        """Send every follower what it lacks, at the next ``flush_broadcast()`` (RawNode.ready
        calls it): many proposals or acks between two Readys then cost one APPEND per
        follower, not one each. ``send_if_empty`` also sends an APPEND with no entries, which
        carries a new commit index to followers that have everything."""
        self.broadcast_pending = True
        self._broadcast_if_empty = self._broadcast_if_empty or send_if_empty

    def _announce_commit(self) -> None:
        """The commit index advanced: tell the followers now, or (``announce_commit_on_tick``)
        with the next APPEND or at the next tick; laggards get their entries now either way."""
        if not self.config.announce_commit_on_tick:
            self._broadcast_append()
            return
        self._broadcast_append(send_if_empty=False)
        self._commit_unannounced = True

    def flush_broadcast(self) -> None:
        if self.broadcast_pending and self.role == Role.LEADER:
            for node_id in self.members():
                if node_id != self.id:
                    self._send_append(node_id, send_if_empty=self._broadcast_if_empty)
        self.broadcast_pending = False
        self._broadcast_if_empty = False

    def _broadcast_heartbeat(self, context: bytes) -> None:
        for node_id in self.members():
            if node_id == self.id:
                continue
            # Never tell a follower to commit beyond what it is known to store.
            commit = min(self.progress[node_id].match_index, self.log.committed)
            self._send(MessageType.HEARTBEAT, node_id, commit=commit, context=context)

    def on_stable(self) -> None:
        """The application persisted more of our log: as leader, count our own copy."""
        if self.role != Role.LEADER:
            return
        if self.progress[self.id].maybe_update(self.log.last_stable_index()) and (
            self._maybe_commit()
        ):
            self._announce_commit()

    def on_applied(self, entries: Sequence[Entry]) -> None:
        """The application applied ``entries``: apply their membership changes and release
        their bytes from the uncommitted budget."""
        for entry in entries:
            if entry.type == EntryType.CONF_CHANGE:
                self.apply_conf_change(entry)
        if self.role == Role.LEADER:
            applied_bytes = sum(len(entry.data) for entry in entries)
            self.uncommitted_bytes = max(0, self.uncommitted_bytes - applied_bytes)

    # --- leader API ------------------------------------------------------------------------

    def propose(self, data_items: Sequence[bytes], entry_type: EntryType) -> int:
        """Append one entry per item, with consecutive indexes; returns the last one. All or
        nothing: ProposalDroppedError appends none of them."""
        assert data_items, "an empty proposal"
        if self.role != Role.LEADER:
            raise ProposalDroppedError(f"{self.id} is not the leader (leader: {self.leader})")
        if self.lead_transferee is not None:
            raise ProposalDroppedError(f"leadership transfer to {self.lead_transferee} under way")
        largest_bytes = max(len(data) for data in data_items)
        if largest_bytes > self.config.max_entry_bytes:
            raise ProposalDroppedError(
                f"entry of {largest_bytes} bytes exceeds "
                f"max_entry_bytes={self.config.max_entry_bytes}"
            )
        size_bytes = sum(len(data) for data in data_items)
        if (
            self.uncommitted_bytes > 0
            and self.uncommitted_bytes + size_bytes > self.config.max_uncommitted_bytes
        ):
            raise ProposalDroppedError(
                f"{self.uncommitted_bytes} uncommitted bytes: max_uncommitted_bytes reached"
            )
        first_index = self.log.last_index() + 1
        term = self.term
        self.log.append(
            [
                Entry(index, term, entry_type, data)
                for index, data in enumerate(data_items, start=first_index)
            ]
        )
        self.uncommitted_bytes += size_bytes
        self._broadcast_append(send_if_empty=False)
        return first_index + len(data_items) - 1

    def propose_conf_change(self, change: ConfChange) -> int:
        if self.role != Role.LEADER:
            raise ProposalDroppedError(f"{self.id} is not the leader (leader: {self.leader})")
        if self.pending_conf_index > self.log.applied:
            raise ProposalDroppedError("a configuration change is still pending")
        if not self.committed_in_current_term():
            # Single-server changes are safe only once the leader committed in its own term
            # (Ongaro, raft-dev 2015: the single-server membership change bug).
            raise ProposalDroppedError("leader has not yet committed an entry of its term")
        reason = refusal(self.conf_state(), change)
        if reason is not None:
            raise ProposalDroppedError(reason)
        index = self.propose([change.encode()], EntryType.CONF_CHANGE)
        self.pending_conf_index = index
        return index

    def transfer_leadership(self, target: NodeId | None) -> None:
        if self.role != Role.LEADER:
            return
        if target is None:
            target = self._most_up_to_date_voter()
            if target is None:
                return
        if target == self.id or target not in self.voters or target == self.lead_transferee:
            return
        self.lead_transferee = target
        # The transfer must finish within an election timeout, or it is abandoned.
        self.election_elapsed_ticks = 0
        if self.progress[target].match_index == self.log.last_index():
            self._send(MessageType.TIMEOUT_NOW, target)
        else:
            self._send_append(target)

    def _most_up_to_date_voter(self) -> NodeId | None:
        candidates = [voter for voter in self.voters if voter != self.id]
        if not candidates:
            return None
        # Highest match wins; ties go to the smallest id (candidates are sorted).
        return max(candidates, key=lambda voter: self.progress[voter].match_index)

    def read_index(self, requester: NodeId, context: bytes) -> None:
        """A read request (see read_only.py for the protocol). On a follower it is forwarded
        to the leader; without a known leader it is dropped (the client retries)."""
        if self.role != Role.LEADER:
            if requester == self.id and self.leader is not None:
                self._send(MessageType.READ_INDEX, self.leader, context=context)
            return
        if not self.committed_in_current_term():
            self.pending_reads.append((requester, context))
            return
        if self.voters == (self.id,):
            self._answer_read(requester, self.log.committed, context)
            return
        if self.read_only.add_request(self.log.committed, context, requester):
            self.read_only.receive_ack(self.id, context)
            self._broadcast_heartbeat(context)

    def _release_pending_reads(self) -> None:
        if not self.pending_reads or not self.committed_in_current_term():
            return
        pending_reads, self.pending_reads = self.pending_reads, []
        for requester, context in pending_reads:
            self.read_index(requester, context)

    def _answer_read(self, requester: NodeId, read_index: int, context: bytes) -> None:
        if requester == self.id:
            self.read_states.append(ReadState(read_index, context))
        else:
            self._send(
                MessageType.READ_INDEX_RESP, requester, log_index=read_index, context=context
            )

    def report_unreachable(self, node_id: NodeId) -> None:
        progress = self.progress.get(node_id) if self.role == Role.LEADER else None
        if progress is not None and progress.state == ProgressState.REPLICATE:
            progress.become_probe()

    def forget_leader(self, node_id: NodeId) -> None:
        """The application knows ``node_id`` is gone (its process ended): a follower led by
        it forgets it, so it grants (pre-)votes at once instead of after the lease, and
        campaigns within a few ticks instead of a whole election timeout. The survivors
        take turns by node id (1, 1 + heartbeat_ticks, 1 + 2 x heartbeat_ticks ... ticks), so
        they do not split the vote by campaigning together. Liveness only: terms, votes and
        logs are untouched, and a message from the leader restores it."""
        if self.role != Role.FOLLOWER or self.leader != node_id:
            return
        self.leader = None
        survivors = sorted(voter for voter in self.voters if voter != node_id)
        rank = survivors.index(self.id) if self.id in survivors else len(survivors)
        ticks_left = 1 + rank * self.config.heartbeat_ticks
        self.election_elapsed_ticks = max(
            self.election_elapsed_ticks, self.randomized_election_ticks - ticks_left
        )

    def report_snapshot(self, node_id: NodeId, success: bool) -> None:
        progress = self.progress.get(node_id) if self.role == Role.LEADER else None
        if progress is None or progress.state != ProgressState.SNAPSHOT:
            return
        if not success:
            progress.pending_snapshot_index = 0
        progress.become_probe()
        # Wait for the next heartbeat answer before probing: the follower may still be busy.
        progress.probe_sent = True
