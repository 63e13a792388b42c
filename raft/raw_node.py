"""RawNode: the public entry to the Raft core. Feed it ticks, messages and proposals; take a
``Ready``, do what it says (persist -> send -> apply; see raftlog.raft.types), then ``advance``.

Rules this module keeps:
- At most one Ready is outstanding: ``ready()`` again before ``advance()`` is a programmer
  error. ``tick``/``step``/``propose`` between the two are allowed; their output waits for the
  next Ready.
- A restart is a new RawNode on the same storage. Term, vote and commit come from
  ``storage.initial_state()``; membership is the snapshot point's (``initial_state()``'s
  ConfState) with the configuration entries in (snapshot index, Config.applied_index] replayed
  on top; committed entries after ``Config.applied_index`` are handed out again.

Membership (single-server changes, Raft thesis §4.1), applied on APPLY, as etcd-io/raft does:
- A change is a CONF_CHANGE entry. Every replica switches membership when ``advance()`` reports
  that entry applied, not when it is appended, so a truncated, uncommitted change never needs
  undoing. Safety comes from three rules: at most one change is pending (a leader refuses a new
  one until the previous one is applied), a leader proposes a change only after it committed an
  entry of its own term (the fix for the single-server-change bug Ongaro reported in 2015),
  and a node with a committed but unapplied change does not campaign.
- Learners (ADD_LEARNER) receive the log but never vote, count toward commit or campaign.
  Promotion is ADD_VOTER on a learner; the application proposes it (in raftlog, the node's
  admin operation) once ``status().progress[learner].match_index`` has reached the leader's
  commit index, so the new voter does not stall commits while it catches up.
- Removing the leader: it keeps leading until the removal is committed and applied, then steps
  down; the remaining voters elect a new leader after an election timeout.
- A removed node hears farewells for two election timeouts once the leader applied its removal
  (its removal entry if it lacks it, and a commit index covering it), so it applies the
  removal and stops campaigning. Whether or not it learns, it cannot move the cluster's term:
  members ignore (pre-)vote requests from nodes outside their membership, before looking at
  the request's term.
- ``ConfChange.context`` travels in the entry untouched (raftlog: the member's address).

Limits (Config):
- max_inflight_appends: per follower, APPENDs stop at the limit until acks free the window
  (a heartbeat answer frees one slot in case an ack was lost).
- max_append_bytes: entry data per APPEND; a larger single entry is sent alone.
- max_uncommitted_bytes: ``propose`` raises ProposalDroppedError while the bytes proposed in
  this term and not yet applied would exceed it (a proposal is always accepted when nothing is
  pending, so one large entry cannot be refused forever).
- max_entry_bytes: a larger proposal raises ProposalDroppedError.
- max_committed_bytes_per_ready: ``Ready.committed_entries`` stops there (at least one entry);
  the rest comes in the next Ready.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from raftlog.raft.config import Config
from raftlog.raft.core import Raft
from raftlog.raft.status import ProgressStatus, Status
from raftlog.raft.types import (
    ConfChange,
    ConfState,
    EntryType,
    HardState,
    LogStorage,
    Message,
    NodeId,
    Ready,
    Role,
    SoftState,
)


class RawNode:
    def __init__(self, config: Config, storage: LogStorage, rng: random.Random) -> None:
        self._raft = Raft(config, storage, rng)
        self._config = config
        self._previous_soft_state = self._soft_state()
        self._previous_hard_state = self._raft.hard_state()
        self._ready_outstanding = False

    # --- inputs ----------------------------------------------------------------------------

    def tick(self) -> None:
        self._raft.tick()

    def step(self, message: Message) -> None:
        """Handle a message from a peer; stale, duplicate, unknown or misaddressed ones are
        ignored. Raises AssertionError only when the message proves safety was already broken
        (e.g. a leader truncating a committed entry): the core refuses to go on from there."""
        self._raft.step(message)

    def propose(self, data: bytes) -> int:
        """Append ``data`` as a new entry; returns its log index. Raises ProposalDroppedError
        (not leader, transfer in progress, a size limit)."""
        return self._raft.propose([data], EntryType.NORMAL)

    def propose_batch(self, data_items: Sequence[bytes]) -> int:
        """Append one entry per item (at least one), with consecutive indexes; returns the
        last one. All or nothing: the limits apply to the batch as a whole (its largest item
        against max_entry_bytes, its total against max_uncommitted_bytes). An addition to the
        API: far cheaper per entry than one ``propose`` call each."""
        return self._raft.propose(data_items, EntryType.NORMAL)

    def propose_conf_change(self, change: ConfChange) -> int:
        """Propose a membership change; ProposalDroppedError while another is pending, before
        the leader committed an entry of its term, or when the change makes no sense."""
        return self._raft.propose_conf_change(change)

    def campaign(self) -> None:
        """Start an election now (after a pre-vote round when pre-vote is on)."""
        self._raft.campaign(transfer=False)

    def transfer_leadership(self, target: NodeId | None = None) -> None:
        """Leader only (a no-op elsewhere): hand leadership to ``target``, or to the most
        up-to-date other voter when None. The leader first catches the target up, then sends
        it TIMEOUT_NOW; proposals are refused meanwhile; the transfer is abandoned after an
        election timeout."""
        self._raft.transfer_leadership(target)

    def read_index(self, context: bytes) -> None:
        """Ask for a linearizable read point; the answer arrives as a ``ReadState`` with this
        ``context`` in a later Ready (see raftlog.raft.read_only). No answer may come (leader
        lost, message dropped): the caller retries after a timeout, with a fresh context."""
        self._raft.read_index(self._config.node_id, context)

    def report_unreachable(self, node_id: NodeId) -> None:
        """The transport failed to reach ``node_id``: stop streaming to it and probe again."""
        self._raft.report_unreachable(node_id)

    def forget_leader(self, node_id: NodeId) -> None:
        """``node_id`` is known to be gone (its process ended, not merely slow): if it leads
        this follower, forget it and campaign within a few ticks instead of an election
        timeout (etcd's ForgetLeader). With pre-vote and check-quorum, a new leader is then
        elected once a majority has forgotten the old one."""
        self._raft.forget_leader(node_id)

    def report_snapshot(self, node_id: NodeId, success: bool) -> None:
        """The outcome of a SNAPSHOT message to ``node_id``. The caller must report every
        SNAPSHOT it was handed, including one it dropped (``success=False``): until then, or
        until the follower acknowledges the snapshot's index, the leader sends that follower
        nothing."""
        self._raft.report_snapshot(node_id, success)

    # --- Ready -----------------------------------------------------------------------------

    def _soft_state(self) -> SoftState:
        return SoftState(leader=self._raft.leader, role=self._raft.role)

    def has_ready(self) -> bool:
        raft = self._raft
        log = raft.log
        return bool(
            self._soft_state() != self._previous_soft_state
            or raft.hard_state() != self._previous_hard_state
            or log.unstable.entries
            or log.unstable.snapshot is not None
            or raft.msgs
            or raft.broadcast_pending
            or raft.read_states
            or log.has_next_committed_entries()
        )

    def ready(self) -> Ready:
        assert not self._ready_outstanding, "ready() called again before advance()"
        raft = self._raft
        log = raft.log
        raft.flush_broadcast()
        ready = Ready()
        soft_state = self._soft_state()
        if soft_state != self._previous_soft_state:
            ready.soft_state = soft_state
            self._previous_soft_state = soft_state
        hard_state = raft.hard_state()
        vote_or_term_changed = False
        if hard_state != self._previous_hard_state:
            ready.hard_state = hard_state
            previous = self._previous_hard_state
            vote_or_term_changed = (hard_state.term, hard_state.vote) != (
                previous.term,
                previous.vote,
            )
            self._previous_hard_state = hard_state
        ready.snapshot = log.unstable.snapshot
        ready.entries = list(log.unstable.entries)
        ready.committed_entries = log.next_committed_entries(
            self._config.max_committed_bytes_per_ready
        )
        ready.messages, raft.msgs = raft.msgs, []
        ready.read_states, raft.read_states = raft.read_states, []
        # A commit-index change alone need not be fsynced: it can be learned again.
        ready.must_sync = bool(ready.entries) or ready.snapshot is not None or vote_or_term_changed
        self._ready_outstanding = True
        return ready

    def advance(self, ready: Ready) -> None:
        """The application persisted, sent and applied ``ready`` (steps 1-3 of the contract)."""
        assert self._ready_outstanding, "advance() without an outstanding ready()"
        self._ready_outstanding = False
        raft = self._raft
        log = raft.log
        if ready.snapshot is not None:
            log.stable_snapshot_to(ready.snapshot.index)
            log.applied_to(min(ready.snapshot.index, log.committed))
        if ready.entries:
            last = ready.entries[-1]
            log.stable_to(last.index, last.term)
        raft.on_stable()
        if ready.committed_entries:
            log.applied_to(ready.committed_entries[-1].index)
            raft.on_applied(ready.committed_entries)

    # --- observing -------------------------------------------------------------------------

    @property
    def role(self) -> Role:
        return self._raft.role

    @property
    def term(self) -> int:
        return self._raft.term

    @property
    def leader(self) -> NodeId | None:
        return self._raft.leader

    @property
    def commit_index(self) -> int:
        return self._raft.log.committed

    @property
    def conf_state(self) -> ConfState:
        """Membership as of the applied index."""
        return self._raft.conf_state()

    @property
    def hard_state(self) -> HardState:
        """Term, vote and commit as the core holds them now (what the next Ready persists)."""
        return self._raft.hard_state()

    def status(self) -> Status:
        raft = self._raft
        progress: dict[NodeId, ProgressStatus] = {}
        for node_id in [n for n in raft.members() if n in raft.progress]:
            pr = raft.progress[node_id]
            progress[node_id] = ProgressStatus(
                match_index=pr.match_index,
                next_index=pr.next_index,
                state=pr.state,
                inflight=pr.inflights.count(),
                is_learner=pr.is_learner,
                recent_active=pr.recent_active,
            )
        return Status(
            node_id=raft.id,
            role=raft.role,
            term=raft.term,
            leader=raft.leader,
            commit_index=raft.log.committed,
            applied_index=raft.log.applied,
            progress=progress,
            vote=raft.vote,
            last_index=raft.log.last_index(),
            conf_state=raft.conf_state(),
            lead_transferee=raft.lead_transferee,
        )
