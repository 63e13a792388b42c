from raftlog.raft.types import Role
from tests.unit.raft.cluster import Cluster


def test_three_nodes_elect_replicate_commit():
    cluster = Cluster(("a", "b", "c"))
    cluster.elect("a")
    assert cluster.nodes["b"].leader == "a"
    index = cluster.propose("a", b"x")
    for node_id in ("a", "b", "c"):
        assert cluster.nodes[node_id].commit_index >= index
        assert cluster.data_applied(node_id) == [b"x"]


def test_election_by_ticks():
    cluster = Cluster(("a", "b", "c"))
    cluster.tick_all(40)
    assert len(cluster.leader_ids()) == 1
    leader = cluster.leader_ids()[0]
    assert all(cluster.nodes[n].leader == leader for n in cluster.ids)
    assert all(cluster.nodes[n].role != Role.CANDIDATE for n in cluster.ids)


def test_single_node():
    cluster = Cluster(("a",))
    cluster.elect("a")
    cluster.propose("a", b"x")
    assert cluster.data_applied("a") == [b"x"]
