"""Banking77 lift on the local models: baseline vs best heldout accuracy, per budget.

    .venv/bin/python bench/banking77_lift.py [--method gepa|mipro] [--auto light] [--seed 0]

Runs the README's main job (examples/banking77/main_job.py: local Qwen2.5-Coder 0.5B student,
1.5B reflection in text mode, 24 train / 40 holdout queries) in a fresh workspace with a fixed
seed, then prints baseline and best heldout accuracy, the lift with its 95% paired bootstrap
interval, paid rollouts and wall time. Why light: it is the default a user gets; its budget
(304 paid rollouts: the baseline 64, six reflect-and-gate steps, heldout selection) finishes in
about a quarter of an hour on 2 cores, and 40 heldout queries resolve accuracy to 2.5 points.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.banking77 import main_job  # noqa: E402
from examples.banking77.design import DESIGN  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--auto", default=DESIGN.auto, choices=("light", "medium", "heavy"))
    parser.add_argument("--max-metric-calls", type=int, default=DESIGN.max_metric_calls)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--method", default="gepa", choices=("gepa", "mipro"))
    parser.add_argument("--reflection", default="1.5b", choices=("0.5b", "1.5b"))
    parser.add_argument("--train-size", type=int, default=DESIGN.train_size)
    parser.add_argument("--holdout-size", type=int, default=DESIGN.holdout_size)
    args = parser.parse_args()
    workspace = Path(tempfile.mkdtemp(prefix="b77-lift-"))
    argv = [
        "--workspace",
        str(workspace),
        "--seed",
        str(args.seed),
        "--method",
        args.method,
        "--reflection",
        args.reflection,
        "--train-size",
        str(args.train_size),
        "--holdout-size",
        str(args.holdout_size),
    ]
    argv += (
        ["--max-metric-calls", str(args.max_metric_calls)]
        if args.max_metric_calls
        else ["--auto", args.auto]
    )
    started = time.monotonic()
    code = main_job.main(argv)
    wall = time.monotonic() - started
    packets = sorted(workspace.glob("runs/*/evidence.json"))
    if code != 0 or not packets:
        print(f"the run failed (exit {code}); no evidence in {workspace}", file=sys.stderr)
        return 1
    p = json.loads(packets[-1].read_text())
    promo = p["promotion"]
    print()
    print(
        f"Banking77 lift ({args.method}): {args.train_size} train / {args.holdout_size} holdout, seed {args.seed}, "
        f"budget {args.max_metric_calls or '--auto ' + args.auto}, reflection {args.reflection}"
    )
    print(f"  baseline heldout accuracy : {p['baseline']['holdout']:.3f}")
    print(
        f"  best heldout accuracy     : {p['best']['holdout']:.3f}  (best {p['best']['candidate_id']}, chosen on {promo['selection_split']})"
    )
    print(
        f"  lift                      : {promo['lift']:+.3f}  95% CI [{promo['ci_low']:+.3f}, {promo['ci_high']:+.3f}]  promoted={promo['promoted']}"
    )
    print(f"  train accuracy            : {p['baseline']['train']:.3f} -> {p['best']['train']:.3f}")
    print(
        f"  paid rollouts             : {p['rollouts']['paid']} (cached {p['rollouts']['cached']}, errors {p['rollouts']['errors']})"
    )
    print(
        f"  candidates                : {len(p['candidates'])}; proposer calls {p['usage']['proposer']['calls']}"
    )
    print(f"  wall time                 : {wall / 60:.1f} min (models already installed)")
    print(f"  evidence                  : {packets[-1].parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
