"""deploy/kubernetes/overlays/dev run as pod-shaped containers (tests/support/pod_runner.py):
no Kubernetes cluster can run here, so each StatefulSet pod is a container started from its
rendered spec, probed and stopped as the kubelet does, and the clients dial the client
Service's name. Under a steady produce load whose history the chaos checker judges:

- a rolling restart, highest ordinal first, each pod stopped (preStop, SIGTERM), re-created
  and ready before the next: no acknowledged write lost, writes stall at most 1 s per pod;
- scale 3 -> 5 -> 3: the new pods join through --join and are promoted; then `member remove`
  and the pods stop: nothing lost;
- a pod's container deleted outright comes back with its volume and rejoins;
- a hung node (its container paused) fails its liveness probe and is restarted: nothing lost.

And overlays/dev-tls (dev with components/tls), its Secret's files made by a development CA:
the exec probes pass, a TLS client reads and writes through the Service while a plain one is
refused, and the preStop hook, which dials TLS, hands leadership over.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftlog.chaos.checker import check
from raftlog.chaos.history import SEND, Recorder, ReplicaSnapshot, SendValue
from raftlog.chaos.target import read_queues
from raftlog.client import Admin, ClientTls, Connection, Consumer, Producer
from raftlog.client.errors import UnavailableError
from raftlog.testing import dev_ca
from raftlog.testing.docker_objects import leftovers
from tests.support.pod_runner import PodRunner
from tests.unit.deploy.manifests import Manifests

pytestmark = pytest.mark.containers

TOPIC = "k8s"
QUEUES = 4
SEND_INTERVAL_S = 0.01
STALL_LIMIT_S = 1.0
STATIC_VOTERS = 3


class Load:
    """One producer sending unique values through the client Service, recorded for the chaos
    checker; ``acked_at`` keeps each acknowledgement's time for the stall measure."""

    def __init__(self, runner: PodRunner) -> None:
        self.recorder = Recorder()
        self.acked_at: list[float] = []
        self._connection = Connection([runner.service_address()], address_map=runner.address_map)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="load")

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self._connection.close()

    def _run(self) -> None:
        producer = Producer(self._connection)
        for number in range(1_000_000):
            if self._stop.wait(SEND_INTERVAL_S):
                break
            invoked = SendValue(topic=TOPIC, value=f"v{number}", queue_id=number % QUEUES)
            self.recorder.invoke("producer", SEND, invoked)
            try:
                result = producer.send(TOPIC, invoked.value.encode(), queue_id=invoked.queue_id)
            except Exception:  # the outcome is unknown: the checker may find it or not
                self.recorder.complete("producer", "info", SEND, invoked)
                continue
            acked = SendValue(
                topic=TOPIC,
                value=invoked.value,
                queue_id=result.queue_id,
                queue_offset=result.queue_offset,
                physical_offset=result.physical_offset,
            )
            self.recorder.complete("producer", "ok", SEND, acked)
            self.acked_at.append(time.monotonic())

    def stall_s(self, start: float, end: float) -> float:
        """The longest time without an acknowledgement between ``start`` and ``end``."""
        inside = [start, *(t for t in self.acked_at if start < t < end), end]
        return max(later - earlier for earlier, later in itertools.pairwise(inside))


def admin(runner: PodRunner) -> Admin:
    return Admin(Connection([runner.service_address()], address_map=runner.address_map))


def assert_nothing_lost(runner: PodRunner, load: Load) -> int:
    """Every pod's replica of the topic against the history; returns the acknowledged sends."""
    time.sleep(3)  # the followers apply the last commits
    replicas = [
        ReplicaSnapshot(node_id=pod.name, queues=read_queues(f"127.0.0.1:{pod.host_port}", TOPIC))
        for pod in runner.pods.values()
    ]
    report = check(load.recorder.ops(), replicas)
    assert report.valid, report.render()
    acked = sum(1 for op in load.recorder.ops() if op.f == SEND and op.type == "ok")
    assert acked > 0
    return acked


def voters(runner: PodRunner) -> set[str]:
    with admin(runner) as client:
        return {m.node_id for m in client.list_members() if m.voter}


@pytest.fixture
def runner(raftlog_image: str) -> Iterator[PodRunner]:
    pods = PodRunner(Manifests.render("dev"), image=raftlog_image)
    try:
        names = [pods.start(ordinal).name for ordinal in range(STATIC_VOTERS)]
        pods.wait_ready(names)
        with admin(pods) as client:
            client.create_topic(TOPIC, QUEUES)
        yield pods
    finally:
        pods.close()
    assert leftovers(pods.run_id) == []


def test_rolling_restart_in_reverse_ordinal_order(runner: PodRunner) -> None:
    stalls_s: dict[str, float] = {}
    with Load(runner) as load:
        time.sleep(2)
        for ordinal in reversed(range(STATIC_VOTERS)):
            name = runner.pod_name(ordinal)
            started = time.monotonic()
            runner.stop(name)
            runner.start(ordinal)
            runner.wait_ready([name])
            stalls_s[name] = load.stall_s(started, time.monotonic())
        time.sleep(2)
    acked = assert_nothing_lost(runner, load)
    print(f"\nrolling restart: {acked} acknowledged, 0 lost; longest stall per pod {stalls_s}")
    assert max(stalls_s.values()) <= STALL_LIMIT_S, stalls_s


def test_scale_up_to_five_and_back_to_three(runner: PodRunner) -> None:
    with Load(runner) as load:
        added = [runner.start(ordinal).name for ordinal in (3, 4)]
        runner.wait_ready(added)
        deadline = time.monotonic() + 120
        while voters(runner) != {runner.pod_name(i) for i in range(5)}:
            assert time.monotonic() < deadline, f"voters: {voters(runner)}"
            time.sleep(1)
        # Scaling down (docs/kubernetes.md): `member remove`, then the pod goes.
        for name in reversed(added):
            with admin(runner) as client:
                client.remove_member(name)
            runner.stop(name)
        time.sleep(2)
    assert voters(runner) == {runner.pod_name(i) for i in range(STATIC_VOTERS)}
    acked = assert_nothing_lost(runner, load)
    print(f"\nscale 3 -> 5 -> 3: {acked} acknowledged, 0 lost")


def test_a_deleted_container_comes_back_with_its_volume(runner: PodRunner) -> None:
    with Load(runner) as load:
        time.sleep(2)
        runner.delete_container(runner.pod_name(1))
        time.sleep(2)
        # The StatefulSet controller re-creates the pod: same name, same claim.
        restarted = runner.start(1)
        runner.wait_ready([restarted.name])
        time.sleep(2)
    assert voters(runner) == {runner.pod_name(i) for i in range(STATIC_VOTERS)}
    acked = assert_nothing_lost(runner, load)
    print(f"\ndeleted container: {acked} acknowledged, 0 lost")


def test_a_hung_node_is_restarted_by_its_liveness_probe(runner: PodRunner) -> None:
    liveness = runner.container_spec["livenessProbe"]
    hung_for_s = liveness["periodSeconds"] * liveness["failureThreshold"]
    pod = runner.pods[runner.pod_name(2)]
    with Load(runner) as load:
        time.sleep(2)
        pod.container.pause()  # frozen: every probe times out, nothing else changes
        deadline = time.monotonic() + hung_for_s + 60
        while pod.restarts == 0:
            assert time.monotonic() < deadline, "the liveness probe never restarted the pod"
            time.sleep(1)
        runner.wait_ready([pod.name])
        time.sleep(2)
    acked = assert_nothing_lost(runner, load)
    print(f"\nhung node: restarted after its liveness probe failed; {acked} acknowledged, 0 lost")


def tls_secret(manifests: Manifests, directory: Path) -> dict[str, bytes]:
    """The Secret raftlog-tls as docs/kubernetes.md says to make it: ca.pem and one pair per
    pod naming its node id, its stable name and the client Service; not the CA's key."""
    namespace = manifests.namespace
    dev_ca.init_ca(str(directory))
    for ordinal in range(STATIC_VOTERS):
        pod = f"raftlog-{ordinal}"
        names = (f"{pod}.raftlog-headless.{namespace}.svc", f"raftlog.{namespace}.svc", "raftlog")
        dev_ca.issue(str(directory), pod, names)
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.name != "ca.key"}


def test_the_tls_overlay_serves_tls_with_working_probes_and_pre_stop(
    raftlog_image: str, tmp_path: Path
) -> None:
    manifests = Manifests.render("dev-tls")
    secret = tls_secret(manifests, tmp_path)
    pods = PodRunner(manifests, image=raftlog_image, secrets={"raftlog-tls": secret})
    # Every certificate names the Service; the client dials mapped host ports, so it expects
    # that name (ClientTls.server_name) rather than 127.0.0.1.
    tls = ClientTls(str(tmp_path / "ca.pem"), server_name=f"raftlog.{manifests.namespace}.svc")
    try:
        started = time.monotonic()
        names = [pods.start(ordinal).name for ordinal in range(STATIC_VOTERS)]
        pods.wait_ready(names)  # the exec probes passed, over TLS
        ready_s = time.monotonic() - started
        address = [pods.service_address()]
        with Connection(address, address_map=pods.address_map, tls=tls) as connection:
            with Admin(connection) as client:
                client.create_topic(TOPIC, 1)
            with Producer(connection) as producer:
                producer.send(TOPIC, b"over tls")
            with Consumer(connection, group="g", topic=TOPIC, from_beginning=True) as consumer:
                assert [m.body for m in consumer.poll(timeout_s=10.0)] == [b"over tls"]
        with (
            Connection(address, address_map=pods.address_map) as plain_connection,
            Admin(plain_connection, timeout_s=3.0) as plain,
            pytest.raises(UnavailableError),
        ):
            plain.list_topics()
        # preStop (run here as the kubelet would, before SIGTERM) moves leadership off the
        # leader; it dials the pod's stable name over TLS.
        with (
            Connection(address, address_map=pods.address_map, tls=tls) as connection,
            Admin(connection) as client,
        ):
            (leader,) = [m.node_id for m in client.list_members() if m.role == "leader"]
            hook = pods.container_spec["lifecycle"]["preStop"]["exec"]["command"]
            assert pods.pods[leader].container.exec_run(hook).exit_code == 0
            deadline = time.monotonic() + 15
            while leader in [m.node_id for m in client.list_members() if m.role == "leader"]:
                assert time.monotonic() < deadline, f"{leader} still leads after preStop"
                time.sleep(0.2)
        print(f"\ndev-tls: 3 pods ready over TLS in {ready_s:.1f} s; preStop moved leadership")
    finally:
        pods.close()
    assert leftovers(pods.run_id) == []
