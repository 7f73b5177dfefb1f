"""Do two builds of the llama.cpp runtime give the same answers? Fixed prompts at temperature 0.

    # once with each interpreter (each venv has its own llama-cpp-python build):
    /path/to/old/venv/bin/python bench/same_answers.py --out old.json
    /path/to/new/venv/bin/python bench/same_answers.py --out new.json
    python bench/same_answers.py --compare old.json new.json

Each run serves the 0.5B and the 1.5B model in turn with this interpreter's
``llama_cpp.server`` (the same settings as the optimizer's servers) and asks each the same
prompts: Banking77 classifications with the label list as system prompt (a long prompt, the
batched matrix kernels) and a longer generation (the one-token decode kernels). It records
every answer's text and the server's speed. ``--compare`` prints the answers that differ
(exit 1 if any) and each model's prompt and generation speed, old against new.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.banking77.agent import build_messages  # noqa: E402
from examples.banking77.data import load_labels  # noqa: E402
from optimizer.local_models import LlamaServer, model_path  # noqa: E402

QUERIES = (
    "I still have not received my new card, I ordered it over a week ago.",
    "Why was I charged a fee when I took money out of the ATM?",
    "My top-up was reverted, what happened?",
    "Can I change my PIN at any cash machine?",
)
PROMPT = "Classify the user's banking intent. Return the best matching label."
GENERATIONS = (
    "Write a Python function that returns the n-th Fibonacci number, with a docstring.",
    "Explain in three sentences what a prompt optimizer does.",
)


def _requests() -> list[dict[str, object]]:
    labels = load_labels()
    asks: list[dict[str, object]] = [
        {"messages": build_messages(PROMPT, labels, q), "max_tokens": 16} for q in QUERIES
    ]
    asks += [
        {"messages": [{"role": "user", "content": text}], "max_tokens": 64} for text in GENERATIONS
    ]
    return asks


def record(out: Path) -> None:
    """Ask every model every request through this interpreter's server; write the answers."""
    results: dict[str, object] = {"python": sys.executable}
    for role in ("student", "reflection"):
        answers, prompt_tokens, completion_tokens, seconds = [], 0, 0, 0.0
        server = LlamaServer(model_path(role), alias=role)
        with server, httpx.Client(base_url=server.base_url, timeout=600) as client:
            for ask in _requests():
                started = time.monotonic()
                body = client.post(
                    "/chat/completions", json={"model": role, "temperature": 0, **ask}
                ).json()
                seconds += time.monotonic() - started
                answers.append(body["choices"][0]["message"]["content"])
                prompt_tokens += body["usage"]["prompt_tokens"]
                completion_tokens += body["usage"]["completion_tokens"]
        results[role] = {
            "answers": answers,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "seconds": round(seconds, 2),
        }
        print(f"{role}: {len(answers)} answers in {seconds:.1f}s", flush=True)
    out.write_text(json.dumps(results, indent=1) + "\n")


def compare(old: Path, new: Path) -> int:
    """Print the differing answers and both speeds; 1 when any answer differs."""
    a, b = json.loads(old.read_text()), json.loads(new.read_text())
    differ = 0
    for role in ("student", "reflection"):
        for i, (x, y) in enumerate(zip(a[role]["answers"], b[role]["answers"], strict=True)):
            if x != y:
                differ += 1
                print(f"{role} #{i} differs:\n  old: {x!r}\n  new: {y!r}")
        print(
            f"{role}: {len(a[role]['answers'])} answers; seconds for all: "
            f"old {a[role]['seconds']}, new {b[role]['seconds']}"
        )
    print("same answers" if not differ else f"{differ} answers differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="record this interpreter's answers here")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"))
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        parser.error("give --out FILE or --compare OLD NEW")
    record(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
