"""A StatefulSet's pods run as Docker containers, each started from its rendered pod spec the
way the kubelet would, for tests/containers/test_kubernetes_pods.py.

For pod ``<set>-<ordinal>`` it takes, from the manifests: the image; ``command`` + ``args``
with the kubelet's ``$(VAR)`` expansion; the environment (``envFrom`` ConfigMaps, ``env`` with
the downward-API fields, tests/unit/deploy/manifests.py); one named Docker volume per
``volumeClaimTemplate`` (kept when the pod goes, as a claim is); ``emptyDir`` volumes as tmpfs
of their ``sizeLimit``; ``secret`` volumes as a Docker volume holding the files the test gives
for that Secret (``secrets``), owned by root with the pod's ``fsGroup`` as group and the
volume's ``defaultMode``, read-only when the mount says so; the securityContext (user and
group, ``fsGroup`` as a supplementary group, read-only root filesystem, dropped capabilities,
no privilege escalation); the pod's stable name under the headless Service
(``<pod>.<service>.<namespace>.svc``) as its network alias and its pod name as hostname. The
probes run as the kubelet runs them (a ``grpc`` probe from the host on the published port, an
``exec`` probe in the container, failing unless it exits 0 within its timeout): the startup
probe until it succeeds, then readiness and liveness, each at its period, timeout and failure
threshold; a failed liveness probe restarts the container (preStop, SIGTERM, grace period,
SIGKILL). ``stop`` is the kubelet's pod stop: the preStop exec, then SIGTERM, and SIGKILL when
the grace period (counted from the preStop's start) ends.

The client Service is a TCP forwarder on the host, as kube-proxy is: each new connection goes
to a ready pod, in turn. Clients dial ``<service>.<namespace>.svc:<port>``; ``address_map``
maps that name to the forwarder and each pod's stable name to its published port.

Rules it keeps: every Docker object carries ``raftlog.test.run=<run id>`` (testing/
docker_objects.py) and ``close`` removes exactly those; a volume type, probe kind or env
source the manifests do not use fails with a message naming it, never silently ignored.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import socket
import tarfile
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from raftlog.testing.docker_objects import LABEL_OWNER, LABEL_RUN, docker_client, owner
from raftlog.testing.node_probes import health
from tests.unit.deploy.manifests import Manifests, container_argv, node_container, pod_environment

Object = dict[str, Any]
_FORWARD_CHUNK_BYTES = 65536


@dataclass
class Pod:
    """One running pod: its container, published port and probe state."""

    name: str
    container: Any
    host_port: int
    ready: bool = False
    restarts: int = 0
    stopping: threading.Event = field(default_factory=threading.Event)


class PodRunner:
    """The pods of the one StatefulSet in ``manifests``, on a Docker network of this run."""

    def __init__(
        self,
        manifests: Manifests,
        *,
        image: str | None = None,
        max_replicas: int = 5,
        secrets: Mapping[str, Mapping[str, bytes]] | None = None,
    ) -> None:
        self.manifests = manifests
        # Secret name -> its files (name -> content), for the pods' secret volumes.
        self.secrets = {name: dict(files) for name, files in (secrets or {}).items()}
        self.statefulset = manifests.one("StatefulSet")
        self.container_spec = node_container(self.statefulset)
        self.pod_spec: Object = self.statefulset["spec"]["template"]["spec"]
        # The image under test (RAFTLOG_TEST_IMAGE), else the manifests' own.
        self.image: str = image or self.container_spec["image"]
        self.run_id = f"k8s-{uuid.uuid4().hex[:8]}"
        self.labels = {LABEL_RUN: self.run_id, LABEL_OWNER: owner()}
        self.pods: dict[str, Pod] = {}
        self._docker = docker_client()
        self._network = self._docker.networks.create(
            f"raftlog-{self.run_id}", labels=self.labels, driver="bridge"
        )
        self._port = self._named_port("grpc")
        self._service = _Forwarder(self._ready_ports)
        # One host port per pod name, kept across re-creations, so ``address_map`` (which a
        # client copies when it connects) holds for every pod up to ``max_replicas``.
        self._host_ports = {self.pod_name(i): _free_port() for i in range(max_replicas)}

    # --- names ---------------------------------------------------------------------------

    def pod_name(self, ordinal: int) -> str:
        return f"{self.statefulset['metadata']['name']}-{ordinal}"

    def stable_name(self, pod: str) -> str:
        """``<pod>.<headless service>.<namespace>.svc``: the pod's DNS name."""
        return f"{pod}.{self.statefulset['spec']['serviceName']}.{self.manifests.namespace}.svc"

    def service_address(self) -> str:
        (service,) = [
            s for s in self.manifests.all_of("Service") if s["spec"].get("clusterIP") != "None"
        ]
        return f"{service['metadata']['name']}.{self.manifests.namespace}.svc:{self._port}"

    @property
    def address_map(self) -> dict[str, str]:
        """Each name a client may dial -> the host address that reaches it."""
        mapped = {
            f"{self.stable_name(name)}:{self._port}": f"127.0.0.1:{port}"
            for name, port in self._host_ports.items()
        }
        mapped[self.service_address()] = f"127.0.0.1:{self._service.port}"
        return mapped

    def _named_port(self, name: str) -> int:
        (port,) = [p for p in self.container_spec["ports"] if p["name"] == name]
        number: int = port["containerPort"]
        return number

    def _ready_ports(self) -> list[int]:
        return [pod.host_port for pod in list(self.pods.values()) if pod.ready]

    # --- pods ----------------------------------------------------------------------------

    def start(self, ordinal: int) -> Pod:
        """Create (or re-create) pod ``ordinal`` and start probing it."""
        name = self.pod_name(ordinal)
        env = pod_environment(self.manifests, self.container_spec, name)
        argv = container_argv(self.container_spec, env)
        container = self._docker.containers.create(
            self.image,
            name=f"raftlog-{self.run_id}-{name}",
            entrypoint=argv[:1],
            command=argv[1:],
            environment=env,
            hostname=name,
            labels=self.labels,
            ports={f"{self._port}/tcp": ("127.0.0.1", self._host_ports[name])},
            **self._mounts(name),
            **self._security(),
        )
        self._network.connect(container, aliases=[self.stable_name(name)])
        # The default bridge, joined at create, would give the pod a second address.
        self._docker.networks.get("bridge").disconnect(container)
        container.start()
        pod = Pod(name, container, self._host_ports[name])
        self.pods[name] = pod
        threading.Thread(target=self._probe, args=(pod,), daemon=True, name=name).start()
        return pod

    def _mounts(self, pod: str) -> Object:
        volumes: dict[str, Object] = {}
        tmpfs: dict[str, str] = {}
        claims = {c["metadata"]["name"] for c in self.statefulset["spec"]["volumeClaimTemplates"]}
        declared = {v["name"]: v for v in self.pod_spec.get("volumes", [])}
        for mount in self.container_spec["volumeMounts"]:
            if mount["name"] in claims:
                # A claim outlives its pod: a named volume, created once and kept.
                volume = f"raftlog-{self.run_id}-{mount['name']}-{pod}"
                with contextlib.suppress(Exception):
                    self._docker.volumes.create(name=volume, labels=self.labels)
                volumes[volume] = {"bind": mount["mountPath"], "mode": "rw"}
                continue
            source = declared[mount["name"]]
            if "secret" in source:
                volume = self._secret_volume(source)
                mode = "ro" if mount.get("readOnly") else "rw"
                volumes[volume] = {"bind": mount["mountPath"], "mode": mode}
                continue
            assert set(source) == {"name", "emptyDir"}, f"volume {source} is not modelled here"
            size = source["emptyDir"].get("sizeLimit", "64Mi").replace("Mi", "m")
            tmpfs[mount["mountPath"]] = f"size={size},mode=1777"
        return {"volumes": volumes, "tmpfs": tmpfs}

    def _secret_volume(self, source: Object) -> str:
        """The Docker volume standing for a secret volume: created (once per run) holding the
        Secret's files as the kubelet writes them: owner root, group fsGroup, defaultMode."""
        secret = source["secret"]
        assert set(secret) <= {"secretName", "defaultMode"}, f"volume {source} is not modelled"
        name = secret["secretName"]
        assert name in self.secrets, f"the test gives no files for the Secret {name}"
        volume = f"raftlog-{self.run_id}-secret-{name}"
        if self._docker.volumes.list(filters={"name": volume}):
            return volume
        self._docker.volumes.create(name=volume, labels=self.labels)
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            for file_name, content in sorted(self.secrets[name].items()):
                entry = tarfile.TarInfo(file_name)
                entry.size = len(content)
                entry.mode = secret.get("defaultMode", 0o644)
                entry.uid, entry.gid = 0, self.pod_spec["securityContext"]["fsGroup"]
                tar.addfile(entry, io.BytesIO(content))
        # Written through a container that never runs (the archive goes into its volume).
        writer = self._docker.containers.create(
            self.image,
            entrypoint=["true"],
            labels=self.labels,
            user="0",
            volumes={volume: {"bind": "/secret", "mode": "rw"}},
        )
        try:
            assert writer.put_archive("/secret", archive.getvalue())
        finally:
            writer.remove(force=True)
        return volume

    def _security(self) -> Object:
        pod, container = self.pod_spec["securityContext"], self.container_spec["securityContext"]
        options = {
            "user": f"{pod['runAsUser']}:{pod['runAsGroup']}",
            "group_add": [str(pod["fsGroup"])],
            "read_only": container["readOnlyRootFilesystem"],
            "cap_drop": container["capabilities"]["drop"],
        }
        if container["allowPrivilegeEscalation"] is False:
            options["security_opt"] = ["no-new-privileges"]
        return options

    def stop(self, name: str) -> float:
        """Stop pod ``name`` as the kubelet does; its container is removed, its claim's volume
        kept. Returns the seconds the stop took."""
        pod = self.pods.pop(name)
        pod.ready = False
        pod.stopping.set()
        started = time.monotonic()
        self._terminate(pod.container)
        pod.container.remove(force=True)
        return time.monotonic() - started

    def delete_container(self, name: str) -> None:
        """The container is gone at once (a crashed node, a deleted container): no preStop."""
        pod = self.pods.pop(name)
        pod.stopping.set()
        pod.container.remove(force=True)

    def _terminate(self, container: Any) -> None:
        grace_s = float(self.pod_spec["terminationGracePeriodSeconds"])
        started = time.monotonic()
        hook = self.container_spec["lifecycle"]["preStop"]["exec"]["command"]
        runner = threading.Thread(target=_exec_quietly, args=(container, hook), daemon=True)
        runner.start()
        runner.join(grace_s)
        # docker stop: SIGTERM, then SIGKILL when what is left of the grace period ends.
        remaining_s = max(1, int(grace_s - (time.monotonic() - started)))
        with contextlib.suppress(Exception):
            container.stop(timeout=remaining_s)

    # --- probes --------------------------------------------------------------------------

    def _check(self, pod: Pod, probe: Object) -> bool:
        timeout_s = float(probe.get("timeoutSeconds", 1))
        if "exec" in probe:
            return _exec_within(pod.container, probe["exec"]["command"], timeout_s)
        assert set(probe["grpc"]) <= {"port", "service"}, f"probe {probe} is not modelled here"
        return health(f"127.0.0.1:{pod.host_port}", timeout_s) == "SERVING"

    def _probe(self, pod: Pod) -> None:
        """The kubelet's probes of one container run (a restart starts new ones): startup until
        it passes, then readiness here and liveness in a thread of its own, each on its own
        period of wall time, as the kubelet's probe workers are."""
        run = pod.restarts
        startup = self.container_spec["startupProbe"]
        failures = 0
        while self._current(pod, run) and not self._check(pod, startup):
            failures += 1
            if failures >= startup["failureThreshold"]:
                self._restart(pod)
                return
            pod.stopping.wait(startup["periodSeconds"])
        liveness = self.container_spec["livenessProbe"]

        def on_liveness(ok: bool, failures: int) -> None:
            if failures >= liveness["failureThreshold"]:
                self._restart(pod)

        def on_readiness(ok: bool, failures: int) -> None:
            # Ready after one success; not ready after failureThreshold failures in a row.
            pod.ready = ok or (pod.ready and failures < readiness["failureThreshold"])

        readiness = self.container_spec["readinessProbe"]
        threading.Thread(
            target=self._every, args=(pod, run, liveness, on_liveness), daemon=True
        ).start()
        self._every(pod, run, readiness, on_readiness)

    def _every(self, pod: Pod, run: int, probe: Object, on_result: Any) -> None:
        failures = 0
        while self._current(pod, run):
            started = time.monotonic()
            ok = self._check(pod, probe)
            failures = 0 if ok else failures + 1
            if self._current(pod, run):
                on_result(ok, failures)
            pod.stopping.wait(max(0.0, probe["periodSeconds"] - (time.monotonic() - started)))

    @staticmethod
    def _current(pod: Pod, run: int) -> bool:
        """Whether the container run ``run`` of ``pod`` is still the one being probed."""
        return not pod.stopping.is_set() and pod.restarts == run

    def _restart(self, pod: Pod) -> None:
        """The kubelet restarts a container that failed its probe: stop, then start again,
        probed from its startup probe on."""
        pod.ready = False
        pod.restarts += 1
        self._terminate(pod.container)
        pod.container.start()
        threading.Thread(target=self._probe, args=(pod,), daemon=True, name=pod.name).start()

    def wait_ready(self, names: list[str], timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not all(self.pods[n].ready for n in names if n in self.pods):
            assert time.monotonic() < deadline, {n: self.pods[n].ready for n in names}
            time.sleep(0.2)

    def close(self) -> None:
        """Stop the probes and the Service, and remove every object of this run."""
        for pod in self.pods.values():
            pod.stopping.set()
        self._service.close()
        client = self._docker
        for container in client.containers.list(all=True, filters=self._filters()):
            container.remove(force=True)
        self._network.remove()
        for volume in client.volumes.list(filters=self._filters()):
            volume.remove(force=True)

    def _filters(self) -> Object:
        return {"label": f"{LABEL_RUN}={self.run_id}"}


class _Forwarder:
    """kube-proxy for one Service: each accepted connection is forwarded to the next ready
    pod's host port."""

    def __init__(self, ready_ports: Any) -> None:
        self._ready_ports = ready_ports
        self._turn = itertools.count()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True, name="service").start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            ports = self._ready_ports()
            if not ports:
                client.close()
                continue
            try:
                backend = socket.create_connection(
                    ("127.0.0.1", ports[next(self._turn) % len(ports)]), timeout=2
                )
            except OSError:
                client.close()
                continue
            backend.settimeout(None)
            for source, sink in ((client, backend), (backend, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()

    def close(self) -> None:
        self._listener.close()


def _exec_quietly(container: Any, argv: list[str]) -> None:
    """Run a hook; a container that cannot run it (paused, exited) is stopped all the same,
    as the kubelet goes on to SIGTERM when a preStop hook fails."""
    with contextlib.suppress(Exception):
        container.exec_run(argv)


def _exec_within(container: Any, argv: list[str], timeout_s: float) -> bool:
    """An exec probe: ``argv`` in the container exits 0 within ``timeout_s`` (a container that
    cannot run it, paused or exited, fails)."""
    exit_codes: list[int | None] = []

    def run() -> None:
        with contextlib.suppress(Exception):
            exit_codes.append(container.exec_run(argv).exit_code)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(timeout_s)
    return not runner.is_alive() and exit_codes == [0]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while chunk := source.recv(_FORWARD_CHUNK_BYTES):
            sink.sendall(chunk)
    for end in (source, sink):
        with contextlib.suppress(OSError):
            end.shutdown(socket.SHUT_RDWR)
