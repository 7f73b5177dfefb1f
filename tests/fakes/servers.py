"""Where the test suite's files are, and the flags of a search against the scripted
reflection model.

The servers and processes tests and benches share (``free_port``, ``wait_http``,
``thread_server``, ``toy_container``, ``rollout_calls``, the toy program's files) are in
:mod:`optimizer.testing`.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKES = Path(__file__).resolve().parent


def fake_reflection_flags(reflection: str, budget: int) -> list[str]:
    """``optimize run``/``create`` flags for a text-mode search of ``budget`` container calls
    against the scripted reflection model at ``reflection`` (the ``reflection_url`` fixture)."""
    return [
        "--reflection-model", "fake-reflection", "--reflection-base-url", reflection,
        "--proposer-mode", "text", "--max-metric-calls", str(budget),
    ]  # fmt: skip
