"""deploy/: the Containerfile and the Kubernetes manifests hold together and match the code.

Nothing here needs a cluster or an image build. Every ``gepa-runtime`` command the manifests
and the Containerfile run is parsed by the real CLI parser, with the container's environment
(secrets filled from secret.example.yaml); the Job's becomes a valid ``RunConfig``; every
environment variable they set is one the code reads; every secret key, Service selector,
target port and probe points at something that exists; and the probes are sent to the real
apps in-process, with the headers the manifests give them.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml

from optimizer.cli.flags import config_from_args
from optimizer.cli.main import build_parser
from optimizer.cli.optimize import check_runnable
from schemas import RunConfig
from schemas.env import config_env, env_names
from workspace import DatabaseURL, resolve_workspace

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
SOURCES = ("schemas", "transport", "container", "workspace", "optimizer", "proposer", "examples")
SECRET = "gepa-secrets"
WORKLOADS = ("Deployment", "StatefulSet", "Job")


def _documents() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append((path.name, doc))
    return docs


DOCS = _documents()


def _secret() -> dict[str, str]:
    (secret,) = [d for _, d in DOCS if d["kind"] == "Secret"]
    assert secret["metadata"]["name"] == SECRET
    return dict(secret["stringData"])


def _containers() -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(workload name, its pod template, container) for every container of every workload."""
    for _, doc in DOCS:
        if doc["kind"] in WORKLOADS:
            name = doc["metadata"].get("name") or doc["metadata"]["generateName"]
            template = doc["spec"]["template"]
            for container in template["spec"]["containers"]:
                yield name, template, container


def _ours() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """The containers that run our image (its entrypoint is ``gepa-runtime``)."""
    return [c for c in _containers() if c[2]["image"].split(":")[0].endswith("gepa-runtime")]


def _env(container: dict[str, Any]) -> dict[str, str]:
    """The container's environment, secret references filled from secret.example.yaml."""
    secret, env = _secret(), {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = str(item["value"])
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            assert ref["name"] == SECRET, f"{item['name']} reads secret {ref['name']!r}"
            assert ref["key"] in secret, f"{item['name']} reads missing key {ref['key']!r}"
            env[item["name"]] = secret[ref["key"]]
    return env


def _known_env_names() -> set[str]:
    """Every variable the code reads: the run config's (and their aliases), and every
    upper-case name that appears as a string literal in the sources."""
    names = {alias for field in RunConfig.model_fields for alias in env_names(config_env(field))}
    pattern = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$")
    for package in SOURCES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                text = node.value if isinstance(node, ast.Constant) else None
                if isinstance(text, str) and pattern.match(text):
                    names.add(text)
    return names


@pytest.fixture()
def environ(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Set a container's environment (and nothing of ours besides) for the parser to read."""
    for name in list(os.environ):
        if name.startswith(("GEPA_", "ROLLOUT_")) and not name.startswith("GEPA_REQUIRE_"):
            monkeypatch.delenv(name)

    def apply(env: dict[str, str]) -> None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)

    return apply


def _by_name(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    (found,) = [(t, c) for w, t, c in _ours() if w.startswith(name)]
    return found


def test_every_manifest_parses_and_the_kustomization_lists_them() -> None:
    kinds = sorted((name, d["kind"]) for name, d in DOCS)
    assert ("job.yaml", "Job") in kinds and ("service.yaml", "Deployment") in kinds
    assert ("task-container.yaml", "Service") in kinds and ("postgres.yaml", "StatefulSet") in kinds
    (kustomization,) = [d for _, d in DOCS if d["kind"] == "Kustomization"]
    listed = set(kustomization["resources"])
    workloads = {name for name, d in DOCS if d["kind"] not in ("Kustomization", "Secret", "Job")}
    assert listed == workloads, "every manifest but the Secret and the Job is applied by -k"
    images = {i["name"] for i in kustomization["images"]}
    assert {c["image"] for _, _, c in _ours()} == images


def test_every_command_parses_with_the_real_cli(environ: Any) -> None:
    ours = _ours()
    assert {w for w, _, _ in ours} == {"gepa-serve", "task-container", "gepa-optimize-"}
    for workload, _, container in ours:
        environ(_env(container))
        try:
            args = build_parser().parse_args(container["args"])
        except SystemExit as exc:  # argparse printed what is wrong on stderr
            pytest.fail(f"{workload}: gepa-runtime {' '.join(container['args'])}: exit {exc.code}")
        assert args.command == container["args"][0]


def test_every_variable_is_one_the_code_reads() -> None:
    known = _known_env_names()
    for workload, _, container in _ours():
        unknown = sorted(set(_env(container)) - known)
        assert not unknown, f"{workload} sets variables nothing reads: {unknown}"


def test_the_job_is_a_valid_run_against_the_task_containers_service(environ: Any) -> None:
    _, container = _by_name("gepa-optimize")
    env = _env(container)
    environ(env)
    args = build_parser().parse_args(container["args"])
    config = config_from_args(args)
    check_runnable(config)
    assert config.concurrency == int(env["GEPA_CONCURRENCY"])
    assert config.rate_limit_wait_s == float(env["GEPA_RATE_LIMIT_WAIT_S"])
    assert config.container_token is not None
    services = {
        d["metadata"]["name"]: {p["port"] for p in d["spec"]["ports"]}
        for _, d in DOCS
        if d["kind"] == "Service"
    }
    for url in config.containers:
        parts = urlsplit(url)
        assert parts.port in services.get(parts.hostname or "", set()), url
    assert isinstance(resolve_workspace(None, env), DatabaseURL)


def test_the_workspace_url_points_at_the_postgres_service() -> None:
    url = urlsplit(_secret()["workspace-url"])
    (service,) = [
        d for _, d in DOCS if d["kind"] == "Service" and d["metadata"]["name"] == url.hostname
    ]
    assert url.port in {p["port"] for p in service["spec"]["ports"]}
    assert url.password == _secret()["postgres-password"]


def test_services_select_pods_and_ports_that_exist() -> None:
    templates = [(w, t) for w, t, _ in _containers()]
    for _, doc in DOCS:
        if doc["kind"] != "Service":
            continue
        selector = doc["spec"]["selector"]
        matched = [t for _, t in templates if selector.items() <= t["metadata"]["labels"].items()]
        assert len(matched) == 1, f"Service {doc['metadata']['name']} selects {len(matched)}"
        ports = {p["name"] for c in matched[0]["spec"]["containers"] for p in c.get("ports", [])}
        for port in doc["spec"]["ports"]:
            assert port["targetPort"] in ports, (doc["metadata"]["name"], port)
    for _, doc in DOCS:
        if doc["kind"] in ("Deployment", "StatefulSet"):
            labels = doc["spec"]["template"]["metadata"]["labels"]
            assert doc["spec"]["selector"]["matchLabels"].items() <= labels.items()


def _probe_headers(container: dict[str, Any], kind: str) -> tuple[str, dict[str, str], int]:
    probe = container[kind]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    headers = {h["name"]: h["value"] for h in probe.get("httpHeaders", [])}
    return probe["path"], headers, ports[probe["port"]]


async def test_the_service_probes_pass_and_other_pods_reach_it(
    environ: Any, tmp_path: Path
) -> None:
    from optimizer.cli.serve import _settings  # how serve turns its flags into settings
    from optimizer.service import create_app

    _, container = _by_name("gepa-serve")
    env = _env(container)
    environ(env)
    args = build_parser().parse_args(container["args"])
    port = int(args.port)
    app = create_app(tmp_path / "ws", _settings(args, args.token, port))
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url=f"http://localhost:{port}") as http,
    ):
        for kind in ("readinessProbe", "livenessProbe"):
            path, headers, probe_port = _probe_headers(container, kind)
            assert probe_port == port
            answer = await http.get(path, headers=headers)
            assert answer.status_code == 200, (kind, answer.text)
        # Without the Host header the kubelet would send the pod's IP, which is refused.
        refused = await http.get("/api/health", headers={"Host": f"10.1.2.3:{port}"})
        assert refused.status_code == 403
        # The Job and other pods reach it by the Service's name, with the token.
        token = {"Authorization": f"Bearer {env['GEPA_SERVE_TOKEN']}"}
        runs = await http.get("/api/runs", headers={"Host": f"gepa-serve:{port}", **token})
        assert runs.status_code == 200, runs.text
        assert (
            await http.get("/api/runs", headers={"Host": f"gepa-serve:{port}"})
        ).status_code == 401


async def test_the_task_container_serves_its_program_and_its_probes(environ: Any) -> None:
    from container.app import create_app
    from container.loader import load_target

    _, container = _by_name("task-container")
    env = _env(container)
    environ(env)
    args = build_parser().parse_args(container["args"])
    assert args.spec.startswith("/app/")  # where the Containerfile copies the sources
    target = load_target(str(ROOT / args.spec.removeprefix("/app/")))
    app = create_app(target, token=args.token)
    assert args.token == env["GEPA_CONTAINER_TOKEN"]
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://c"
    ) as http:
        for kind in ("readinessProbe", "livenessProbe"):
            path, headers, port = _probe_headers(container, kind)
            assert port == int(args.port)
            assert (await http.get(path, headers=headers)).status_code == 200
        assert (await http.get("/program")).status_code == 401
        program = await http.get("/program", headers={"Authorization": f"Bearer {args.token}"})
    assert program.status_code == 200
    assert len(program.json()["seeds"]["train"]) == int(env["B77_TRAIN_SIZE"])


def _instruction(text: str, word: str) -> list[str]:
    (line,) = [ln for ln in text.splitlines() if ln.startswith(word + " ")]
    return list(json.loads(line[len(word) + 1 :]))


def test_the_containerfile_runs_the_cli_and_installs_extras_that_exist(environ: Any) -> None:
    text = (DEPLOY / "Containerfile").read_text()
    assert _instruction(text, "ENTRYPOINT") == ["gepa-runtime"]
    cmd = _instruction(text, "CMD")
    args = build_parser().parse_args(cmd)
    assert args.command == "serve"
    (expose,) = [int(ln.split()[1]) for ln in text.splitlines() if ln.startswith("EXPOSE ")]
    _, serve = _by_name("gepa-serve")
    assert expose == int(args.port) == serve["ports"][0]["containerPort"]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    (install,) = re.findall(r'pip install "\.\[([a-z,]+)\]"', text)
    assert set(install.split(",")) <= set(extras)
    copied = {
        source
        for line in text.splitlines()
        if line.startswith("COPY ")
        for source in line.split()[1:-1]
    }
    assert all((ROOT / source).exists() for source in copied), copied
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    packages = {name.rstrip("*") for name in find["find"]["include"]}
    assert packages <= copied, f"packages the Containerfile does not copy: {packages - copied}"
    user = re.search(r"^USER (\d+)$", text, re.M)
    assert user is not None
    for _, template, _ in _ours():
        assert str(template["spec"]["securityContext"]["runAsUser"]) == user.group(1)


def test_docs_explain_every_manifest() -> None:
    doc = (ROOT / "docs" / "deploy.md").read_text()
    for path in [*K8S.glob("*.yaml"), DEPLOY / "Containerfile"]:
        assert path.name in doc, f"docs/deploy.md does not mention {path.name}"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_renders_the_kustomization() -> None:
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, check=True
    ).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    assert {d["metadata"].get("namespace") for d in docs} == {"gepa"}
    images = {
        c["image"]
        for d in docs
        if d["kind"] in WORKLOADS
        for c in d["spec"]["template"]["spec"]["containers"]
    }
    assert "registry.example.com/gepa-runtime:0.1.0" in images
