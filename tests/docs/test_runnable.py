"""Code blocks marked runnable in the docs (``<!-- runnable -->`` before the fence) run as written.

Each Python block runs as a script in a fresh folder, in a process of its own, with the
``openai`` package's variables pointing at one scripted model server on 127.0.0.1
(:mod:`tests.fakes.docs_models`): whatever model a block names, requests in the proposer's
format get the scripted reflection model, the others the scripted student.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from optimizer.testing import thread_server
from tests.docs.pages import RUNNABLE, pages, runnable_blocks
from tests.fakes import docs_models
from tests.fakes.servers import ROOT

pytestmark = pytest.mark.e2e

MARKED = [
    pytest.param(language, code, id=f"{path.relative_to(ROOT)}-{i}")
    for path in pages()
    for i, (language, code) in enumerate(runnable_blocks(path))
]


def run_block(code: str, folder: Path) -> str:
    """Run one Python block as ``folder/example.py`` against the scripted models; its stdout."""
    script = folder / "example.py"
    script.write_text(code, encoding="utf-8")
    with thread_server(docs_models.create_app()) as models:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": f"{models}/v1",
            "OPENAI_API_KEY": "sk-docs-test",
            "PYTHONPATH": str(ROOT),
        }
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, f"the block failed:\n{code}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_some_blocks_are_marked_runnable() -> None:
    assert len(MARKED) >= 1
    marked = sum(p.read_text(encoding="utf-8").count(RUNNABLE) for p in pages())
    assert marked == len(MARKED), "a runnable marker that is not right before a code fence"


@pytest.mark.parametrize(("language", "code"), MARKED)
def test_a_runnable_block_runs_as_written(language: str, code: str, tmp_path: Path) -> None:
    assert language == "python", f"runnable blocks are Python; this one is {language}"
    assert run_block(code, tmp_path).strip(), "the block printed nothing"
