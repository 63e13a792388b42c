"""How the harnesses lay out a master-slave group (LocalCluster, RaftlogCluster). Static: the
first node is the master (broker_id 0, SYNC_MASTER or ASYNC_MASTER), every other node a slave
of it (broker_id = its position). Under a controller: every node names the controller and the
kind of master it is when elected. One definition, turned into flags or environment variables
by each harness.

Rules this module keeps: pure; the settings are NodeConfig field names with string values.
"""

from __future__ import annotations

from collections.abc import Sequence

MASTER_ROLES = ("SYNC_MASTER", "ASYNC_MASTER")


def master_slave_settings(
    node_ids: Sequence[str],
    node_id: str,
    master_role: str,
    master_address: str,
    controller_addresses: str | None = None,
) -> dict[str, str]:
    """The master-slave settings of ``node_id`` in a group of ``node_ids`` whose first node
    (reached at ``master_address``) is the master; with ``controller_addresses`` the
    controller elects instead, and every node is a ``master_role`` when elected."""
    if master_role not in MASTER_ROLES:
        raise ValueError(f"master_role {master_role!r} is not one of {', '.join(MASTER_ROLES)}")
    index = list(node_ids).index(node_id)
    settings = {"replication": "master-slave", "broker_id": str(index)}
    if controller_addresses is not None:
        return {
            **settings,
            "broker_role": master_role,
            "controller_addresses": controller_addresses,
        }
    if index == 0:
        return {**settings, "broker_role": master_role}
    return {**settings, "broker_role": "SLAVE", "ha_master_address": master_address}
