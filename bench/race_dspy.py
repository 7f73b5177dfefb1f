"""DSPy's MIPROv2 on the Banking77 main job's work: a user-level peer for ``bench/race.py``.

    .venv/bin/python bench/race_dspy.py --student-base-url http://127.0.0.1:8012/v1 \\
        --reflection-base-url http://127.0.0.1:8013/v1 --max-metric-calls 296 --out dspy.json

What is the same as for the other contestants: the student (the local 0.5B behind its
llama.cpp server, temperature 0), the prompt model (the local 1.5B, at most
``--reflection-max-tokens`` a call), the baseline instruction, the train and holdout queries
(``examples/banking77/design.py``'s sizes, sampled as the container samples them), the
scoring (the answer parsed to a label as the container parses it, 1 if it is the expected
one), and the number of student calls: ``--max-metric-calls`` minus the holdout evaluation
of the baseline and of the winner, like ours.

What is DSPy's own: the prompt format (its ChatAdapter, ``[[ ## label ## ]]`` fields, with
the 77 labels in the output field's description, and its JSON fallback when the answer does
not parse), its bootstrapped and labelled demos, its instruction proposer (data summary,
program and tips), and its search (TPE over instruction x demo set on minibatches of the
train set, the best re-scored on the whole train set every few trials). DSPy has no budget in
calls, so the number of trials is derived from the budget (``plan``) and the calls it really
made are counted and reported: the ``calls`` column is student calls, not container calls.

The program runs in our venv (the ``[dspy]`` extra: DSPy 3.x); nothing of gepa-runtime's
optimizer is used.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.banking77.data import SampleConfig, parse_intents, prepare_dataset  # noqa: E402
from examples.banking77.design import DESIGN  # noqa: E402
from examples.banking77.labels import parse_label  # noqa: E402
from examples.banking77.program import BASELINE  # noqa: E402

INTENTS = parse_intents(DESIGN.intents)  # the design's intents, as the container keeps them
LABELS = SampleConfig(intents=INTENTS).labels()
TOOL = f"dspy {dspy.__version__} MIPROv2"


class _Intent(dspy.Signature):
    query: str = dspy.InputField(desc="a customer's message to the bank")
    label: str = dspy.OutputField(desc=f"exactly one of: {', '.join(LABELS)}")


# The container's baseline prompt is the starting instruction.
Intent = _Intent.with_instructions(BASELINE)


def examples(path: Path) -> list[dspy.Example]:
    """One split file of the container's dataset folder, as DSPy examples."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [dspy.Example(query=r["text"], label=r["category"]).with_inputs("query") for r in rows]


def metric(gold: dspy.Example, pred: dspy.Prediction, trace: Any = None) -> float:
    """1.0 when the answer names the expected label (parsed as the container parses it)."""
    return float(parse_label(str(pred.get("label") or ""), LABELS) == gold.label)


@dataclass(frozen=True)
class Plan:
    """MIPROv2's settings for a budget of student calls."""

    candidates: int
    trials: int
    minibatch: int
    full_eval_every: int
    estimate: int  # student calls the search may make at most, holdout excluded


def plan(search_calls: int, train: int, candidates: int = 4, minibatch: int = 8) -> Plan:
    """The most trials whose worst case fits ``search_calls`` student calls.

    Worst case: each of the ``candidates - 2`` bootstrapped demo sets runs the student over
    the whole train set (a weak student rarely gets enough right to stop early), the baseline
    is scored on train, each trial on a minibatch, and the best on train every
    ``full_eval_every`` trials and once at the end.
    """
    every = 5
    fixed = (candidates - 2) * train + train
    trials = 0
    while fixed + (trials + 1) * minibatch + (math.ceil((trials + 1) / every) + 1) * train <= (
        search_calls
    ):
        trials += 1
    if trials == 0:
        raise SystemExit(f"--max-metric-calls leaves {search_calls} calls: too few for a trial")
    estimate = fixed + trials * minibatch + (math.ceil(trials / every) + 1) * train
    return Plan(candidates, trials, min(minibatch, train), every, estimate)


def accuracy(program: dspy.Module, devset: list[dspy.Example], threads: int) -> float:
    """Mean metric of ``program`` on ``devset``."""
    evaluate = dspy.Evaluate(devset=devset, metric=metric, num_threads=threads)
    return float(evaluate(program).score) / 100


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Compile with MIPROv2, score baseline and winner on holdout, return the record."""
    folder = prepare_dataset(SampleConfig(args.train_size, args.holdout_size, args.seed, INTENTS))
    train, holdout = examples(folder / "train.jsonl"), examples(folder / "holdout.jsonl")
    student = dspy.LM(
        "openai/student", api_base=args.student_base_url, api_key="local",
        temperature=0.0, max_tokens=32, cache=False, num_retries=3,
    )  # fmt: skip
    prompt_model = dspy.LM(
        "openai/reflection", api_base=args.reflection_base_url, api_key="local",
        max_tokens=args.reflection_max_tokens, cache=False, num_retries=3,
    )  # fmt: skip
    # An answer neither of DSPy's adapters can parse is an error it scores 0; the 0.5B writes
    # many, and past max_errors DSPy would abort the evaluation and score the trial 0.
    dspy.configure(lm=student, max_errors=100_000)
    chosen = plan(args.max_metric_calls - 2 * len(holdout), len(train))
    started = time.monotonic()
    optimizer = dspy.MIPROv2(
        metric=metric, prompt_model=prompt_model, task_model=student, auto=None,
        num_candidates=chosen.candidates, num_threads=args.concurrency, seed=args.seed,
        max_bootstrapped_demos=4, max_labeled_demos=4,
    )  # fmt: skip
    best = optimizer.compile(
        dspy.Predict(Intent), trainset=train, valset=train, num_trials=chosen.trials,
        minibatch_size=chosen.minibatch, minibatch_full_eval_steps=chosen.full_eval_every,
    )  # fmt: skip
    search_calls = len(student.history)
    baseline_holdout = accuracy(dspy.Predict(Intent), holdout, args.concurrency)
    best_holdout = accuracy(best, holdout, args.concurrency)
    return {
        "tool": TOOL,
        "seed": args.seed,
        "plan": chosen.__dict__,
        "wall_s": round(time.monotonic() - started, 3),
        "student_calls": len(student.history),
        "search_student_calls": search_calls,
        "reflection_calls": len(prompt_model.history),
        "train_size": len(train),
        "holdout_size": len(holdout),
        "train_best": float(best.score) / 100,  # DSPy's scores are percentages
        "holdout_baseline": baseline_holdout,
        "holdout_best": best_holdout,
        "best_instructions": best.signature.instructions,
        "best_demos": len(best.demos),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--student-base-url", required=True, help="OpenAI-compatible, .../v1")
    parser.add_argument("--reflection-base-url", required=True, help="the prompt model's")
    parser.add_argument("--max-metric-calls", type=int, required=True, help="student calls")
    parser.add_argument("--train-size", type=int, default=DESIGN.train_size)
    parser.add_argument("--holdout-size", type=int, default=DESIGN.holdout_size)
    parser.add_argument("--reflection-max-tokens", type=int, default=DESIGN.reflection_max_tokens)
    parser.add_argument("--concurrency", type=int, default=DESIGN.concurrency)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    record = run(args)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(
        f"{TOOL} seed={args.seed}: wall {record['wall_s']:.1f}s | student calls "
        f"{record['student_calls']} (plan {record['plan']}) | prompt-model calls "
        f"{record['reflection_calls']} | train best {record['train_best']:.3f} | holdout "
        f"{record['holdout_baseline']:.3f} -> {record['holdout_best']:.3f}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
