"""deploy/compose.yaml with the TLS override deploy/compose.tls.yaml, read as Compose merges
them: every node of compose.yaml gets TLS, its settings name its own certificate and key in the
directory mounted read-only, the node's config loader takes that environment, the CLI in the
container dials TLS, and the image's unchanged HEALTHCHECK command passes against a TLS node
(and fails without the TLS settings); RAFTLOG_TLS_DIR unset stops Compose with a message.

The merge is modelled here (environment maps merged by name, volumes by container path,
``${VAR:-default}``/``${VAR:?message}`` interpolation) and, where docker-compose or ``docker
compose`` is installed, compared with what ``config`` renders. No container runs: for that,
``deploy/compose-smoke --tls``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # no types-PyYAML in the dev extra

from raftlog.cli.health import node_tls
from raftlog.client import ClientTls
from raftlog.node.config_sources import load_config
from raftlog.testing import dev_ca
from tests.support import REPO_ROOT
from tests.support.tls_health import tls_health_server

COMPOSE = REPO_ROOT / "deploy" / "compose.yaml"
COMPOSE_TLS = REPO_ROOT / "deploy" / "compose.tls.yaml"
DOCKERFILE = REPO_ROOT / "deploy" / "Dockerfile"
MOUNT_PATH = "/etc/raftlog/tls"
TLS_DIR = "/srv/raftlog-tls"
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:-|:\?)([^}]*))?\}")

Object = dict[str, Any]


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's ``${NAME}``, ``${NAME:-default}``, ``${NAME:?message}`` (unset or empty)."""

    def value(match: re.Match[str]) -> str:
        name, form, word = match.groups()
        if env.get(name):
            return env[name]
        if form == ":?":
            raise ValueError(f"{name}: {word}")
        return word or ""

    assert "$" not in _VARIABLE.sub("", text), f"a form not modelled here: {text}"
    return _VARIABLE.sub(value, text)


def merged(env: Mapping[str, str]) -> dict[str, Object]:
    """compose.yaml, then compose.tls.yaml: each service's environment and volumes."""
    base, override = (yaml.safe_load(path.read_text()) for path in (COMPOSE, COMPOSE_TLS))
    services: dict[str, Object] = {}
    for name, service in base["services"].items():
        extra = override["services"].get(name, {})
        unknown = set(extra) - {"environment", "volumes"}
        assert not unknown, f"{name}: override fields {unknown} are not modelled here"
        environment = {**service["environment"], **extra.get("environment", {})}
        volumes = {v.split(":")[1]: v for v in service.get("volumes", [])}
        volumes |= {v.split(":")[1]: v for v in extra.get("volumes", [])}
        services[name] = {
            "environment": {k: interpolate(str(v), env) for k, v in environment.items()},
            "volumes": sorted(interpolate(v, env) for v in volumes.values()),
        }
    assert set(override["services"]) == set(services), "the override names other services"
    return services


@pytest.fixture(scope="module")
def services() -> dict[str, Object]:
    return merged({"RAFTLOG_TLS_DIR": TLS_DIR})


def test_every_node_mounts_the_directory_read_only_and_names_its_own_pair(
    services: dict[str, Object],
) -> None:
    assert set(services) == {"n1", "n2", "n3"}
    for name, service in services.items():
        env = service["environment"]
        assert f"{TLS_DIR}:{MOUNT_PATH}:ro" in service["volumes"]
        assert env["RAFTLOG_NODE_ID"] == name
        assert env["RAFTLOG_TLS_CA_FILE"] == f"{MOUNT_PATH}/ca.pem"
        assert env["RAFTLOG_TLS_CERT_FILE"] == f"{MOUNT_PATH}/{name}.pem"
        assert env["RAFTLOG_TLS_KEY_FILE"] == f"{MOUNT_PATH}/{name}.key"
        # `exec nX raftlog ...` dials TLS as that node.
        assert ClientTls.from_env(env) == ClientTls(
            f"{MOUNT_PATH}/ca.pem", f"{MOUNT_PATH}/{name}.pem", f"{MOUNT_PATH}/{name}.key"
        )


@pytest.mark.parametrize("client_auth", ["", "true"])
def test_the_node_takes_the_environment(
    services: dict[str, Object], tmp_path: Path, client_auth: str
) -> None:
    env = merged({"RAFTLOG_TLS_DIR": TLS_DIR, "RAFTLOG_TLS_CLIENT_AUTH_ENABLE": client_auth})
    config = load_config(None, env["n2"]["environment"], {"data_dir": str(tmp_path)})
    assert config.tls_enabled and config.tls_cert_file == f"{MOUNT_PATH}/n2.pem"
    assert config.tls_client_auth_enable is (client_auth == "true")
    assert config.exposure_warning() is None  # TLS on: no "exposed" warning


def test_a_missing_certificate_directory_stops_compose_with_a_message() -> None:
    with pytest.raises(ValueError, match="RAFTLOG_TLS_DIR: set RAFTLOG_TLS_DIR"):
        merged({})


def healthcheck_command() -> list[str]:
    """The image's HEALTHCHECK command (deploy/Dockerfile, exec form)."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    match = re.search(r"^HEALTHCHECK .*? CMD (\[.*\])$", text, re.MULTILINE)
    assert match is not None, "deploy/Dockerfile has no exec-form HEALTHCHECK"
    command: list[str] = json.loads(match.group(1))
    return command


@pytest.mark.parametrize("client_auth", [False, True], ids=["server-auth", "client-auth"])
def test_the_image_healthcheck_passes_against_a_tls_node(
    services: dict[str, Object], tmp_path: Path, client_auth: bool
) -> None:
    """n1's certificate as `raftlog certs issue --node n1` makes it (docs/deploy.md)."""
    dev_ca.init_ca(str(tmp_path))
    dev_ca.issue(str(tmp_path), "n1")
    env = {
        key: value.replace(MOUNT_PATH, str(tmp_path))
        for key, value in services["n1"]["environment"].items()
    }
    probe_tls = node_tls(env)
    # The probe expects the certificate to name the node id, whatever address it dials.
    assert probe_tls is not None and probe_tls.server_name == "n1"
    command = healthcheck_command()
    assert command[:3] == ["python3", "-m", "raftlog.cli.health"]
    with tls_health_server(tmp_path, "n1", client_auth=client_auth) as port:
        env["RAFTLOG_LISTEN_ADDRESS"] = f"0.0.0.0:{port}"
        run = [sys.executable, *command[1:]]
        done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0, (done.stdout, done.stderr)
        plain = {k: v for k, v in env.items() if not k.startswith("RAFTLOG_TLS_")}
        refused = subprocess.run(
            run, env=plain, capture_output=True, text=True, timeout=30, check=False
        )
        assert refused.returncode == 1


def compose_command() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    docker = shutil.which("docker")
    if docker is not None:
        version = subprocess.run(
            [docker, "compose", "version"], capture_output=True, timeout=30, check=False
        )
        if version.returncode == 0:
            return [docker, "compose"]
    return None


def test_compose_merges_the_files_as_modelled(services: dict[str, Object]) -> None:
    command = compose_command()
    if command is None:
        pytest.skip("neither docker-compose nor `docker compose` is installed")
    files = ["-f", str(COMPOSE), "-f", str(COMPOSE_TLS)]
    # Only what the files say: none of the variables they read comes from this environment.
    env = {"PATH": os.environ["PATH"], "RAFTLOG_TLS_DIR": TLS_DIR}
    done = subprocess.run(
        [*command, "-p", "t", *files, "config"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rendered = yaml.safe_load(done.stdout)["services"]
    for name, service in services.items():
        environment = {key: str(value) for key, value in rendered[name]["environment"].items()}
        assert environment == service["environment"]
        volumes = [
            v
            if isinstance(v, str)
            else f"{v['source']}:{v['target']}" + (":ro" if v.get("read_only") else "")
            for v in rendered[name]["volumes"]
        ]
        assert sorted(v.replace(":rw", "") for v in volumes) == service["volumes"]
    missing = subprocess.run(
        [*command, "-p", "t", *files, "config"],
        env={"PATH": env["PATH"]},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert missing.returncode != 0 and "set RAFTLOG_TLS_DIR" in missing.stderr
