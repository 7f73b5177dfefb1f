"""The chaos bench's scenarios: one function each, driving real processes and noting what
must hold (:meth:`chaos_procs.Scene.check`). Paid twice, secrets and scores are audited
afterwards by ``bench/chaos.py`` for every scenario alike."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from typing import Any

import chaos_audit as audit
from chaos_container import FAULTS, HOSTILE, echoing_reflection_app
from chaos_procs import (
    REFLECTION_KEY,
    SERVICE_ENV_SECRET,
    SERVICE_TOKEN,
    URL_API_KEY,
    URL_PASSWORD,
    Scene,
    api,
    cli,
    completed,
    container,
    evidence,
    finish,
    killed,
    only_run,
    run_flags,
    run_record,
    serve,
    start,
    wait_paid,
)

from optimizer.testing import thread_server


def faults(scene: Scene) -> None:
    """429/503 with Retry-After, 500s, dropped connections, answers past the timeout."""
    with container(scene, "--faults", "--slow", "2.5") as box:
        code, _ = cli(scene, *run_flags(scene, box.url, "--rollout-timeout", "1"))
    rid = only_run(scene).run_id
    served = audit.calls(box.log)
    injected = [c.fault for c in served if c.fault]
    scene.check("the run completed", code == 0 and completed(scene, rid))
    scene.check(
        f"every fault kind was injected {sorted(set(injected))}", set(injected) == set(FAULTS)
    )
    rollouts = evidence(scene, rid).get("rollouts", {})
    scene.check(
        f"no errored rollout (errors {rollouts.get('errors')})", rollouts.get("errors") == 0
    )
    scene.check(
        f"every fault was retried (retries {rollouts.get('retries')}, faults {len(injected)})",
        rollouts.get("retries") == len(injected),
    )


def sigkill(scene: Scene) -> None:
    """SIGKILL mid-search, then ``optimize run RUN_ID`` takes the dead holder's lease over."""
    with container(scene, "--delay", "0.05") as box:
        proc = start(scene, run_flags(scene, box.url))
        rid = wait_paid(scene, proc, 60)
        killed(scene, proc, signal.SIGKILL)
        scene.check("left running by SIGKILL", run_record(scene, rid).status == "running")
        code, printed = cli(scene, "optimize", "run", rid, "--workspace", str(scene.ws), "--quiet")
    scene.check("the resume took the lease over", f"took run {rid} over" in printed)
    scene.check("the resumed run completed", code == 0 and completed(scene, rid))


def sigterm(scene: Scene) -> None:
    """SIGTERM ends the run as cancelled with the resume command; the resume completes it."""
    with container(scene, "--delay", "0.05") as box:
        proc = start(scene, run_flags(scene, box.url))
        rid = wait_paid(scene, proc, 60)
        code = killed(scene, proc, signal.SIGTERM)
        printed = proc.printed()
        scene.check(f"exit 143 on SIGTERM (got {code})", code == 143)
        scene.check("the resume command was printed", f"gepa-runtime optimize run {rid}" in printed)
        scene.check("cancelled", run_record(scene, rid).status == "cancelled")
        code, _ = cli(scene, "optimize", "run", rid, "--workspace", str(scene.ws), "--quiet")
    scene.check("the resumed run completed", code == 0 and completed(scene, rid))


def concurrent(scene: Scene) -> None:
    """A second CLI process and the service try to run a run a live CLI process holds."""
    with container(scene, "--delay", "0.25") as box:  # slow enough to outlive the attempts
        first = start(scene, run_flags(scene, box.url))
        rid = wait_paid(scene, first, 20)
        code, printed = cli(scene, "optimize", "run", rid, "--workspace", str(scene.ws), "--quiet")
        scene.check(
            f"a second CLI process was refused naming pid {first.pid} (exit {code})",
            code == 2 and f"is being run by pid {first.pid}" in printed,
        )
        # The operator allows the run's key variable: only the lease may refuse it.
        allow = ("--allow-key-env", "CHAOS_REFLECTION_KEY")
        with serve(scene, "--token", SERVICE_TOKEN, *allow) as (url, _):
            answer = api(scene, "POST", f"{url}/api/runs/{rid}/start", token=SERVICE_TOKEN)
        scene.check("the first process still ran meanwhile", first.proc.poll() is None)
        scene.check(
            f"the service was refused (HTTP {answer.status_code})",
            answer.status_code == 409 and f"pid {first.pid}" in answer.text,
        )
        code, _ = finish(first)
    scene.check("the first process completed the run", code == 0 and completed(scene, rid))


def service_kill(scene: Scene) -> None:
    """A run the service executes, the service SIGKILLed, the run resumed by the CLI."""
    allow = ("--allow-key-env", "CHAOS_REFLECTION_KEY")
    with container(scene, "--delay", "0.05") as box:
        with serve(scene, "--token", SERVICE_TOKEN, *allow) as (url, service):
            config = api_config(scene, box.url)
            answer = api(
                scene, "POST", f"{url}/api/runs", token=SERVICE_TOKEN,
                json={"config": config, "start": True},
            )  # fmt: skip
            scene.check(
                f"the service started the run (HTTP {answer.status_code})",
                answer.status_code == 201,
            )
            rid = wait_paid(scene, service, 60)
            killed(scene, service, signal.SIGKILL)
        code, printed = cli(scene, "optimize", "run", rid, "--workspace", str(scene.ws), "--quiet")
    scene.check(
        f"the CLI took the lease over from pid {service.pid}",
        f"took run {rid} over from pid {service.pid}" in printed,
    )
    scene.check("the resumed run completed", code == 0 and completed(scene, rid))


def api_config(scene: Scene, url: str) -> dict[str, Any]:
    """:func:`chaos_procs.run_flags`'s run as the service's JSON config."""
    return {
        "containers": [url], "reflection_model": "fake-reflection",
        "reflection_base_url": scene.reflection, "reflection_api_key_env": "CHAOS_REFLECTION_KEY",
        "proposer_mode": "text", "max_metric_calls": 400, "seed": 3, "use_merge": False,
        "max_idle_iterations": 6, "retry_base_delay_s": 0.01, "concurrency": 4,
    }  # fmt: skip


def other_program(scene: Scene) -> None:
    """Resume with ``--container`` pointing at another program: refused, nothing mixed."""
    with container(scene, "--delay", "0.05") as box:
        proc = start(scene, run_flags(scene, box.url))
        rid = wait_paid(scene, proc, 30)
        killed(scene, proc, signal.SIGTERM)
        with container(scene, "--program", "other") as other:
            code, printed = cli(
                scene, "optimize", "run", rid, "--container", other.url,
                "--workspace", str(scene.ws), "--quiet",
            )  # fmt: skip
        scene.check(
            f"refused naming both programs (exit {code})",
            code == 2 and "'chaos-labels'" in printed and "'chaos-other'" in printed,
        )
        scene.check("the other program served no rollout", not audit.calls(other.log))
        code, _ = cli(scene, "optimize", "run", rid, "--workspace", str(scene.ws), "--quiet")
    scene.check("the resume on its own program completed", code == 0 and completed(scene, rid))
    candidates = audit.read_workspace(scene.ws, lambda ws: ws.list_candidates(rid))
    mixed = [c.candidate_id for c in candidates if set(c.components) != {"system_prompt"}]
    scene.check(f"no candidate of the other program ({mixed})", not mixed)


def hostile(scene: Scene) -> None:
    """NaN/7.0/"0.9"/true rewards, a negative cost, an oversized body: errored, never scored."""
    scene.hostile = True
    with container(scene, "--hostile") as box:
        code, _ = cli(scene, *run_flags(scene, box.url))
    rid = only_run(scene).run_id
    answered = [c for c in audit.calls(box.log) if c.fault and c.fault.startswith("hostile:")]
    scene.check("the run completed", code == 0 and completed(scene, rid))
    scene.check(
        f"every hostile kind was answered {sorted({str(c.fault) for c in answered})}",
        {c.seed for c in answered} == set(HOSTILE),
    )
    counts = audit.read_workspace(scene.ws, lambda ws: ws.count_trials(rid))
    errors = counts["errors"]
    scene.check(
        f"each hostile answer is one errored rollout, not retried ({errors} errors, "
        f"{len(answered)} hostile answers)",
        errors == len(answered) and evidence(scene, rid)["rollouts"]["errors"] == errors,
    )
    cost = evidence(scene, rid).get("usage", {}).get("student", {}).get("cost_usd", -1)
    scene.check(f"the student cost stays non-negative ({cost})", cost >= 0)


def secret_401(scene: Scene) -> None:
    """A reflection endpoint that echoes its key in a 401; credentials in the container URL."""
    seen: list[str] = []
    with thread_server(echoing_reflection_app(seen)) as echo, container(scene, token=None) as box:
        scene.secrets["URL password"] = URL_PASSWORD
        with_password = box.url.replace("http://", f"http://chaos:{URL_PASSWORD}@")
        flags = run_flags(scene, with_password, reflection=f"{echo}/v1")
        code, printed = cli(scene, *flags)
    scene.check("the key was really sent and echoed", bool(seen) and set(seen) == {REFLECTION_KEY})
    scene.check(
        f"refused naming the key variable (exit {code})",
        code == 2 and "CHAOS_REFLECTION_KEY" in printed,
    )


def secret_token(scene: Scene) -> None:
    """A container that quotes its bearer token in every answer's feedback and trace."""
    with container(scene, "--echo-token") as box:
        code, _ = cli(scene, *run_flags(scene, box.url))
    rid = only_run(scene).run_id
    scene.check("the run completed", code == 0 and completed(scene, rid))
    stored = (scene.ws / "workspace.sqlite").read_bytes()
    wal = scene.ws / "workspace.sqlite-wal"
    stored += wal.read_bytes() if wal.exists() else b""
    scene.check("the echoed feedback was stored, masked", b"credential is ***" in stored)


def cross_site(scene: Scene) -> None:
    """The issue's cross-site POST against an open ``serve``, and what a config may name."""
    seen: list[str] = []
    marker = scene.peers / "module-was-imported"
    evil = scene.peers / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').write('imported')\n")
    scene.secrets["service env secret"] = SERVICE_ENV_SECRET
    with thread_server(echoing_reflection_app(seen)) as capture, container(scene) as box:
        env = {"CHAOS_DB_PASSWORD": SERVICE_ENV_SECRET}
        with serve(scene, "--no-token", **env) as (url, _):
            config = {
                "containers": [box.url], "reflection_model": "m", "max_metric_calls": 20,
                "reflection_base_url": f"{capture}/v1", "reflection_api_key_env": "CHAOS_DB_PASSWORD",
            }  # fmt: skip
            _attacks(scene, url, config, str(evil))
            _credentials_in_urls(scene, url)
    scene.check("the capture endpoint got no request", not seen)
    scene.check("no module was imported", not marker.exists())
    scene.check("the container got no request", not audit.calls(box.log))


def _attacks(scene: Scene, url: str, config: dict[str, Any], module: str) -> None:
    port = url.rsplit(":", 1)[1]
    body = json.dumps({"config": config, "start": True})
    foreign = {"Origin": "http://attacker.example", "Host": f"attacker.example:{port}"}
    attacks = {
        "text/plain + foreign Origin and Host (the issue's)": {
            "Content-Type": "text/plain",
            **foreign,
        },
        "foreign Origin": {"Content-Type": "application/json", "Origin": foreign["Origin"]},
        "foreign Host (DNS rebinding)": {
            "Content-Type": "application/json",
            "Host": foreign["Host"],
        },
        "a key variable outside the allowlist": {"Content-Type": "application/json"},
    }
    for what, headers in attacks.items():
        answer = api(scene, "POST", f"{url}/api/runs", content=body, headers=headers)
        scene.check(
            f"refused: {what} (HTTP {answer.status_code})", answer.status_code in (403, 415)
        )
    as_module = {
        **config,
        "containers": [],
        "module": module,
        "reflection_api_key_env": "OPENAI_API_KEY",
    }
    answer = api(scene, "POST", f"{url}/api/runs", json={"config": as_module, "start": True})
    scene.check(f"refused: a module path (HTTP {answer.status_code})", answer.status_code == 403)
    runs = api(scene, "GET", f"{url}/api/runs").json()["runs"]
    scene.check(f"no run was created by an attack ({len(runs)})", runs == [])


def _credentials_in_urls(scene: Scene, url: str) -> None:
    """A run created with credentials in its URLs: stored, served and shown masked."""
    scene.secrets |= {"URL password": URL_PASSWORD, "URL api-key": URL_API_KEY}
    leaky = f"http://chaos:{URL_PASSWORD}@127.0.0.1:9/?api-key={URL_API_KEY}"
    config = {"containers": [leaky], "reflection_model": "m", "max_metric_calls": 20}
    created = api(scene, "POST", f"{url}/api/runs", json={"config": config})
    scene.check(
        f"a legitimate run is created (HTTP {created.status_code})", created.status_code == 201
    )
    if created.status_code == 201:
        api(scene, "GET", f"{url}/api/runs/{created.json()['run_id']}")


SCENARIOS: dict[str, tuple[str, Callable[[Scene], None]]] = {
    "faults": ("fault-injecting container", faults),
    "sigkill": ("SIGKILL mid-search, resume", sigkill),
    "sigterm": ("SIGTERM, resume", sigterm),
    "concurrent": ("two runners on one run id", concurrent),
    "service-kill": ("service SIGKILLed, CLI resumes", service_kill),
    "other-program": ("resume on another program", other_program),
    "hostile": ("hostile answers", hostile),
    "secret-401": ("key echoed in a 401, URL creds", secret_401),
    "secret-token": ("container token echoed", secret_token),
    "cross-site": ("cross-site POST to serve", cross_site),
}
