"""The calculator ReAct example optimized by GEPA and by MIPRO on the local models.

    .venv/bin/python bench/calculator_methods.py [--max-metric-calls 200] [--seed 0] [--methods gepa,mipro]

Starts the local Qwen2.5-Coder models (0.5B student, 1.5B reflection), serves
``examples/calculator`` against the student, runs ``gepa-runtime optimize run`` once per
method with the same budget in one fresh workspace, and prints baseline and best heldout
accuracy, the lift, paid rollouts and wall time for each. Both runs share the rollout cache,
so the second pays nothing for the baseline the first already scored (the figures say so).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.banking77.main_job import LOCAL_KEY  # noqa: E402
from examples.processes import serving_process  # noqa: E402
from optimizer.local_models import free_port, install_models, serve_models  # noqa: E402


def _run(
    method: str, container: str, reflection: str, workspace: Path, args: argparse.Namespace
) -> dict:
    cmd = [
        sys.executable, "-m", "optimizer.cli", "optimize", "run", "--method", method,
        "--container", container, "--reflection-model", "reflection",
        "--reflection-base-url", reflection, "--proposer-mode", "text",
        "--reflection-max-tokens", "700", "--max-prompt-chars", "2500",
        "--max-idle-iterations", "6", "--num-instructions", "4",
        "--max-metric-calls", str(args.max_metric_calls), "--seed", str(args.seed),
        "--workspace", str(workspace), "--quiet",
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{method} failed:\n{done.stdout}\n{done.stderr}")
    packets = sorted(workspace.glob("runs/*/evidence.json"), key=lambda p: p.stat().st_mtime)
    packet = json.loads(packets[-1].read_text())
    packet["_wall_min"] = wall / 60
    return packet


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--max-metric-calls", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", default="gepa,mipro", help="comma-separated, run in order")
    args = parser.parse_args()
    install_models(student=True, reflection="1.5b")
    workspace = Path(tempfile.mkdtemp(prefix="calc-methods-"))
    with serve_models(
        student_port=free_port(), reflection_port=free_port(), reflection="1.5b"
    ) as served:
        assert served.reflection is not None
        port = free_port()
        env = {**os.environ, "OPENAI_API_KEY": LOCAL_KEY, "OPENAI_BASE_URL": served.student.base_url,
               "GEPA_STUDENT_MODEL": "student"}  # fmt: skip
        container = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "examples.calculator", "--port", str(port)]
        with serving_process(cmd, env, f"{container}/health", "the calculator container"):
            packets = {
                m: _run(m, container, served.reflection.base_url, workspace, args)
                for m in ("gepa", "mipro")
            }
    print(
        f"\ncalculator ReAct (0.5B student, 1.5B reflection), budget {args.max_metric_calls}, seed {args.seed}"
    )
    for method, p in packets.items():
        promo = p["promotion"]
        print(
            f"  {method:5s}: heldout {p['baseline']['holdout']:.3f} -> {p['best']['holdout']:.3f}"
            f"  lift {promo['lift']:+.3f} [{promo['ci_low']:+.3f}, {promo['ci_high']:+.3f}]"
            f"  train {p['baseline']['train']:.3f} -> {p['best']['train']:.3f}"
            f"  paid {p['rollouts']['paid']} cached {p['rollouts']['cached']}"
            f"  proposer calls {p['usage']['proposer']['calls']}  wall {p['_wall_min']:.1f} min"
        )
    print(f"  workspace: {workspace}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
