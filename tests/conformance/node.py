"""Node and the TypeScript SDK for Python-side tests: find Node, build the package, serve containers.

Tests that need Node skip when it (or the package's dev dependencies, ``npm ci`` in
``container/typescript``) is missing, unless ``GEPA_REQUIRE_NODE=1``, which turns the skip into
a failure (``.ci/run`` sets it). The package is built with its own ``tsc`` once per session.
Containers of both SDKs are real processes on 127.0.0.1 that pick a free port and announce it
(``serving <id> on http://127.0.0.1:PORT``); they are stopped by their pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[2]
TS_ROOT = ROOT / "container" / "typescript"
CLI = TS_ROOT / "dist" / "src" / "cli.js"
FIXTURES = TS_ROOT / "dist" / "test" / "fixtures"
GUIDE = ROOT / "docs" / "wrap-typescript.md"
ANNOUNCE = re.compile(r"serving (\S+) on (http://\S+)")
_built: list[str] = []


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("GEPA_REQUIRE_NODE") == "1":
        pytest.fail(f"GEPA_REQUIRE_NODE=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def node_binary() -> str:
    """The path of ``node`` >= 20, built package included (skip or fail when unavailable)."""
    node = shutil.which("node")
    if node is None:
        _unavailable("node is not installed (Debian: apt-get install nodejs npm)")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    if int(version.lstrip("v").split(".")[0]) < 20:
        _unavailable(f"node {version} is too old; the TypeScript SDK needs Node >= 20")
    if not _built:
        tsc = TS_ROOT / "node_modules" / "typescript" / "bin" / "tsc"
        if not tsc.exists():
            _unavailable(
                "the TypeScript SDK's dev dependencies are missing: cd container/typescript && npm ci"
            )
        done = subprocess.run(
            [node, str(tsc), "-p", str(TS_ROOT / "tsconfig.json")], capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.fail(f"tsc failed:\n{done.stdout}{done.stderr}", pytrace=False)
        _built.append(node)
    return _built[0]


def oracle(request: dict[str, Any]) -> Any:
    """Ask the TypeScript SDK (test/fixtures/oracle.ts) one question; its JSON answer."""
    done = subprocess.run(
        [node_binary(), str(FIXTURES / "oracle.js")],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@contextlib.contextmanager
def node_container(
    spec: str | Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[str]:
    """``gepa-container serve SPEC ARGS`` on a free port of 127.0.0.1; yields its URL."""
    cmd = [node_binary(), str(CLI), "serve", str(spec), "--host", "127.0.0.1", "--port", "0", *args]
    with _serving(cmd, env) as url:
        yield url


@contextlib.contextmanager
def python_container(
    spec: str | Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[str]:
    """``gepa-runtime container SPEC ARGS`` on a free port of 127.0.0.1; yields its URL."""
    cmd = [sys.executable, "-m", "optimizer.cli", "container", str(spec), "--host", "127.0.0.1"]
    with _serving([*cmd, "--port", "0", "--log-level", "warning", *args], env) as url:
        yield url


@contextlib.contextmanager
def _serving(cmd: list[str], env: dict[str, str] | None) -> Iterator[str]:
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )
    lines: queue.Queue[str | None] = queue.Queue()
    output: list[str] = []
    assert proc.stdout is not None
    pump = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
    pump.start()
    try:
        yield _announced(proc, lines, output)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        pump.join(timeout=10)  # the pipe closes with the process
        proc.stdout.close()


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _announced(
    proc: subprocess.Popen[str], lines: queue.Queue[str | None], output: list[str]
) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if line is None:
            proc.wait(timeout=10)
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}:\n{''.join(output)}")
        output.append(line)
        match = ANNOUNCE.search(line)
        if match:
            return match.group(2)
    raise TimeoutError(f"{proc.args} did not announce its address:\n{''.join(output)}")


def readme_agent_source() -> str:
    """The TypeScript agent of the TypeScript guide (``docs/wrap-typescript.md``), as written."""
    text = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"```ts\n(.*?)```", text, re.S)
    assert blocks, "docs/wrap-typescript.md has no ```ts block"
    return str(blocks[0])


def build_readme_agent(folder: Path) -> Path:
    """Write the guide's agent into a new project in ``folder`` and compile it; its .js path.

    The project depends on the SDK as ``npm install /path/to/container/typescript`` would
    make it (a link in node_modules), and compiles with the SDK's own TypeScript.
    """
    node = node_binary()
    folder.mkdir(parents=True, exist_ok=True)
    modules = folder / "node_modules"
    (modules / "@types").mkdir(parents=True, exist_ok=True)
    (modules / "gepa-container").symlink_to(TS_ROOT, target_is_directory=True)
    (modules / "@types" / "node").symlink_to(TS_ROOT / "node_modules" / "@types" / "node")
    (folder / "package.json").write_text('{"type": "module", "private": true}\n')
    (folder / "tsconfig.json").write_text(
        json.dumps(
            {
                "compilerOptions": {
                    "target": "ES2022",
                    "module": "NodeNext",
                    "moduleResolution": "NodeNext",
                    "strict": True,
                    "types": ["node"],
                    "outDir": "dist",
                },
                "include": ["agent.ts"],
            }
        )
    )
    (folder / "agent.ts").write_text(readme_agent_source(), encoding="utf-8")
    tsc = TS_ROOT / "node_modules" / "typescript" / "bin" / "tsc"
    done = subprocess.run([node, str(tsc), "-p", str(folder)], capture_output=True, text=True)
    assert done.returncode == 0, f"the guide's agent does not compile:\n{done.stdout}{done.stderr}"
    return folder / "dist" / "agent.js"
