"""`raftlog cluster up|down|status`: a local cluster of real node processes (LocalCluster).

Rules this module keeps: `up` leaves the nodes running in the background and returns once a
leader is known (printing a dot about every half second while waiting); on a data directory
whose cluster runs, `up` says so and changes nothing; `down` stops the node processes that
own the directory's stores (recorded in <data-dir>/cluster.json or found by their store
lock, never any other process) and names the nodes it had to kill; `status` asks every
member for its own view and the leader for the lag, and prints one table row per member
(voter or learner), its last column the node's metrics URL (every node `up` starts serves
metrics on a free port), then a summary of the membership.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from raftlog.cli.common import (
    DEFAULT_DATA_DIR,
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_replication_flags,
    add_tls_flags,
    master_role,
)

if TYPE_CHECKING:  # the client is imported lazily: `raftlog --help` stays fast
    from raftlog.client import ClusterStatus, Member


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `cluster up|down|status`."""
    cluster = commands.add_parser("cluster", help="a local cluster of node processes")
    actions = cluster.add_subparsers(dest="cluster_command", required=True)
    up = actions.add_parser("up", help="start a local cluster in the background")
    up.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="default ./data")
    up.add_argument("--nodes", type=int, default=3, help="node count (default 3)")
    up.add_argument(
        "--base-port",
        type=int,
        default=7701,
        help="n1 listens on this port, nK on base+K-1 (default 7701; 0: free ports)",
    )
    up.add_argument("--durability", choices=("fsync", "write"), default="fsync")
    add_replication_flags(up)
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a leader")
    down = actions.add_parser("down", help="stop the local cluster")
    down.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    down.add_argument("--timeout", type=float, default=15.0, help="seconds before SIGKILL")
    status = actions.add_parser("status", help="members, roles, leader, term, commit, lag")
    status.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    status.add_argument("--servers", help="host:port,... (default: the local cluster's)")
    add_tls_flags(status)


def run(args: argparse.Namespace) -> int:
    """Dispatch one cluster command."""
    if args.cluster_command == "up":
        return _up(args)
    if args.cluster_command == "down":
        return _down(args)
    return _status(args)


def _up(args: argparse.Namespace) -> int:
    from raftlog.testing.local_cluster import LocalCluster

    if args.nodes < 1:
        raise UsageError(f"--nodes is {args.nodes}; it must be at least 1")
    if args.replication == "master-slave" and args.nodes < 2:
        raise UsageError(
            "--replication master-slave needs --nodes 2 or more (a master and a slave)"
        )
    controllers = None
    if args.replication == "master-slave" and not args.static:
        from raftlog.testing.local_controllers import LocalControllers

        controllers = LocalControllers(os.path.abspath(args.data_dir))
    cluster = LocalCluster(
        args.data_dir,
        args.nodes,
        args.base_port,
        durability=args.durability,
        replication=args.replication,
        master_role=master_role(args),
        controllers=controllers,
        metrics=True,
    )
    running = cluster.adopt_running()
    if running:
        pids = ", ".join(f"{n} pid {cluster.nodes[n].pid}" for n in running)
        print(
            f"a local cluster is already running in {cluster.base_dir} ({pids}); nothing was "
            "changed (stop it with: raftlog cluster down)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(f"starting {args.nodes} nodes in {cluster.base_dir} ", end="", flush=True)

    def dot() -> None:
        print(".", end="", flush=True)

    try:
        cluster.start(args.timeout, progress=dot)
    finally:
        print(flush=True)
    leader = cluster.leader_address() or "unknown"
    for node in cluster.nodes.values():
        marker = "  (leader)" if node.address == leader else ""
        metrics = cluster.metrics_url(node.node_id)
        print(f"{node.node_id}  {node.address}  pid {node.pid}  metrics {metrics}{marker}")
    print(f"servers: {','.join(cluster.addresses)}")
    print(f"logs: {cluster.base_dir}/<node>/node.log; stop with: raftlog cluster down")
    return EXIT_OK


def _down(args: argparse.Namespace) -> int:
    from raftlog.testing.local_cluster import LocalCluster

    cluster = LocalCluster.load(args.data_dir)
    running = [n for n in cluster.nodes if cluster.running(n)]
    killed = cluster.stop(args.timeout)
    graceful = [n for n in running if n not in killed]
    if not running:
        print("stopped 0 node(s): none were running")
    if graceful:
        print(f"stopped {len(graceful)} node(s) gracefully: {', '.join(graceful)}")
    if killed:
        print(
            f"killed {len(killed)} node(s) that had not stopped {args.timeout:g} s after "
            f"SIGTERM: {', '.join(killed)} (see their node.log)"
        )
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    from raftlog.cli.common import client_tls, client_token, default_servers
    from raftlog.client import Admin, Connection, RaftlogError, parse_addresses

    try:
        addresses = parse_addresses(args.servers or default_servers(args.data_dir))
    except ValueError as error:
        raise UsageError(f"--servers: {error}") from None
    views: dict[str, ClusterStatus | None] = {}
    with (
        Connection(addresses, tls=client_tls(args), token=client_token(args)) as connection,
        Admin(connection, timeout_s=2.0) as admin,
    ):
        for address in addresses:
            try:
                views[address] = admin.cluster_status(address=address)
            except RaftlogError:
                views[address] = None
        leader_view = next(
            (v for v in views.values() if v is not None and v.role == "leader"), None
        )
        members = leader_view or next((v for v in views.values() if v), None)
        if members is None:
            print(f"no member answered ({', '.join(addresses)})", file=sys.stderr)
            return EXIT_FAILED
        # Members other nodes know about but --servers did not name.
        for member in members.members:
            if member.address not in views:
                try:
                    views[member.address] = admin.cluster_status(address=member.address)
                except RaftlogError:
                    views[member.address] = None
        # The leader may be among the members learned just now.
        leader_view = next(
            (v for v in views.values() if v is not None and v.role == "leader"), None
        )
    lag = {m.node_id: m for m in (leader_view.members if leader_view else ())}
    listed = {m.address: m.node_id for m in members.members}
    master_slave = members.replication == "master-slave"
    if master_slave:
        rows = _master_slave_rows(views, lag, listed)
    else:
        kinds = {m.node_id: "voter" if m.voter else "learner" for m in members.members}
        rows = _raft_rows(views, lag, listed, kinds)
    rows = _with_metrics_column(rows, views)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    leader = f"{leader_view.node_id} at {leader_view.leader_address}" if leader_view else "unknown"
    term = max((v.term for v in views.values() if v), default=0)
    if master_slave:
        in_sync = ",".join(m.node_id for m in members.members if m.in_sync) if leader_view else "?"
        print(
            f"cluster {members.cluster_id}, broker group {members.broker_name} (master-slave): "
            f"master {leader}, epoch {term}, in sync {in_sync or 'none'}"
        )
    else:
        voters = ",".join(m.node_id for m in members.members if m.voter)
        learners = ",".join(m.node_id for m in members.members if not m.voter)
        print(
            f"cluster {members.cluster_id}: leader {leader}, term {term}; "
            f"voters {voters or 'none'}, learners {learners or 'none'}"
        )
    return EXIT_OK


def _with_metrics_column(rows: list[Row], views: dict[str, ClusterStatus | None]) -> list[Row]:
    """``rows`` (a header, then one row per view, in ``views`` order) with a METRICS column:
    each node's Prometheus URL from its own answer (a node knows only its own), else "-"."""
    urls = []
    for view in views.values():
        own = next((m for m in view.members if m.node_id == view.node_id), None) if view else None
        urls.append(own.metrics_url if own is not None and own.metrics_url else "-")
    header, *body = rows
    return [(*header, "METRICS"), *((*row, url) for row, url in zip(body, urls, strict=True))]


Row = tuple[str, ...]


def _raft_rows(
    views: dict[str, ClusterStatus | None],
    lag: dict[str, Member],
    listed: dict[str, str],
    kinds: dict[str, str],
) -> list[Row]:
    """One row per member; MEMBER is voter or learner ("-" for a node the membership no
    longer lists, e.g. one just removed)."""
    rows: list[Row] = [
        ("NODE", "ADDRESS", "MEMBER", "ROLE", "TERM", "COMMIT", "APPLIED", "LAST", "LAG", "ACTIVE")
    ]
    for address, view in views.items():
        node_id = view.node_id if view else listed.get(address, "?")
        progress = lag.get(node_id)
        kind = kinds.get(node_id, "-")
        if view is None:
            rows.append((node_id, address, kind, "down", "-", "-", "-", "-", "-", "-"))
            continue
        rows.append(
            (
                node_id,
                address,
                kind,
                view.role,
                str(view.term),
                str(view.commit_index),
                str(view.applied_index),
                str(view.last_index),
                str(progress.lag_entries) if progress and progress.has_progress else "-",
                ("yes" if progress.recent_active else "no") if progress else "-",
            )
        )
    return rows


def _master_slave_rows(
    views: dict[str, ClusterStatus | None], lag: dict[str, Member], listed: dict[str, str]
) -> list[Row]:
    """One row per broker: its role, epoch, CommitLog offsets (bytes) and, from the master's
    view, how far behind it is and whether it is in the in-sync set."""
    rows: list[Row] = [
        (
            "NODE",
            "ADDRESS",
            "ROLE",
            "EPOCH",
            "CONFIRMED",
            "VISIBLE",
            "END",
            "LAG_BYTES",
            "LAG_S",
            "IN_SYNC",
        )
    ]
    for address, view in views.items():
        node_id = view.node_id if view else listed.get(address, "?")
        progress = lag.get(node_id)
        if view is None:
            rows.append((node_id, address, "down", *("-",) * 7))
            continue
        known = progress is not None and (progress.has_progress or progress.role == "leader")
        rows.append(
            (
                node_id,
                address,
                view.broker_role,
                str(view.term),
                str(view.commit_index) if view.role == "leader" else "-",
                str(view.applied_index),
                str(view.last_index),
                str(progress.lag_bytes) if known and progress else "-",
                f"{progress.lag_ms / 1000:.1f}" if known and progress else "-",
                ("yes" if progress.in_sync else "no") if progress else "-",
            )
        )
    return rows
