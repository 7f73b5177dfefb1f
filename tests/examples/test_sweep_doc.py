"""The sweeps guide's examples (``docs/sweeps.md``), run as written.

The shell and the Python block are read from the page; only the container URL is replaced
by that of a real container on 127.0.0.1 whose three student models differ in skill and
price (:mod:`tests.fakes.model_container`), and ``gpt-4.1`` reaches the scripted reflection
model through ``OPENAI_BASE_URL``, as the ``openai`` client reads it.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from optimizer.testing import reflection_app, thread_server
from tests.fakes.model_container import ModelContainer
from tests.fakes.servers import ROOT

pytestmark = pytest.mark.e2e

DOC_URL = "http://127.0.0.1:8100"


def _blocks(language: str) -> list[str]:
    text = (ROOT / "docs" / "sweeps.md").read_text(encoding="utf-8")
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with (
        thread_server(ModelContainer().app()) as container,
        thread_server(reflection_app()) as model,
    ):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{model}/v1")
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        yield container


def test_the_shell_example(tmp_path: Path, servers: str) -> None:
    (command,) = _blocks("sh")
    argv = shlex.split(command.replace("\\\n", " ").replace(DOC_URL, servers))
    assert argv[0] == "gepa-runtime"
    done = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", *argv[1:], "--workspace", str(tmp_path / "ws")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr
    assert "cheapest model meeting 0.8 on holdout: gpt-4.1-mini" in done.stdout
    assert len(re.findall(r"student model \S+: run run-", done.stderr)) == 3
    (folder,) = (tmp_path / "ws" / "sweeps").iterdir()
    assert (folder / "comparison.json").exists() and (folder / "comparison.md").exists()


async def test_the_python_example(
    tmp_path: Path, servers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (code,) = _blocks("python")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    body = textwrap.indent(code.replace(DOC_URL, servers), "    ")
    exec(f"async def example():\n{body}", namespace)  # noqa: S102 - the guide's own code
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        await namespace["example"]()  # type: ignore[operator]
    winner, folder = printed.getvalue().split()
    assert winner == "gpt-4.1-mini"
    assert Path(folder).parent == tmp_path / ".gepa" / "sweeps"
