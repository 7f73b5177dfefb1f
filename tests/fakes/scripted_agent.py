"""A scripted coding agent for ``--proposer-command`` tests: it edits the component files
from what the failures say, as Codex or Claude Code would in the proposal folder.

It reads ``rollouts.json`` (the verifier says "expected cow"), and rewrites each editable
file (``$GEPA_COMPONENT_FILES``) to name at most two labels it did not name yet, so the
search needs several steps. It writes ``rationale.md`` and prints its usage as the last
line of its output. Being a pure function of the folder, two identical runs propose alike.

    python scripted_agent.py [--outside-first N --state FILE] [--no-usage] [--echo-env NAME]
        [--sleep S] [--record FILE]

``--state FILE`` counts its runs in FILE; ``--outside-first N`` makes the first N also write ``notes.txt``
beside the components, which the runtime must refuse. ``--echo-env NAME`` puts the value
of ``$NAME`` into its rationale (an agent that leaks a key). Every run records the names of
the variables it saw in ``$GEPA_PROPOSAL_LOGS/env.json``; ``--record FILE`` appends one JSON
line per run to FILE: the person's notes it was given (``$GEPA_NOTES_FILE``, else null) and
its ``TASK.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

EXPECTED = re.compile(r"expected[\s'\"`]*([a-z]{3})\b", re.I)
KNOWN = re.compile(r"Known labels: ([a-z, ]+)\.")


def _new_text(text: str, rollouts: list[dict[str, object]]) -> tuple[str, list[str]]:
    known: set[str] = set()
    for found in KNOWN.findall(text):
        known |= {w.strip() for w in found.split(",") if w.strip()}
    seen = [m.lower() for r in rollouts for m in EXPECTED.findall(str(r.get("feedback") or ""))]
    new = list(dict.fromkeys(label for label in seen if label not in known))[:2]
    words = sorted(known | set(new))
    base = KNOWN.sub("", text).strip() or "Answer with the label."
    return f"{base} Known labels: {', '.join(words)}.", new


def _count(state: Path) -> int:
    runs = int(state.read_text()) if state.exists() else 0
    state.write_text(str(runs + 1))
    return runs


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--outside-first", type=int, default=0)
    parser.add_argument("--state", type=Path)
    parser.add_argument("--no-usage", action="store_true")
    parser.add_argument("--echo-env")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    logs = Path(os.environ["GEPA_PROPOSAL_LOGS"])
    (logs / "env.json").write_text(json.dumps(sorted(os.environ)))
    if args.record:
        notes = os.environ.get("GEPA_NOTES_FILE")
        asked = {
            "notes": Path(notes).read_text() if notes else None,
            "task": Path("TASK.md").read_text(),
        }
        with args.record.open("a", encoding="utf-8") as out:
            out.write(json.dumps(asked) + "\n")
    time.sleep(args.sleep)
    rollouts = json.loads(Path("rollouts.json").read_text())
    added: list[str] = []
    for rel in os.environ["GEPA_COMPONENT_FILES"].split():
        path = Path(rel)
        text, new = _new_text(path.read_text(), rollouts)
        path.write_text(text + "\n")
        added += new
    rationale = f"name the labels the student missed: {', '.join(added) or 'none'}"
    if args.echo_env:
        rationale += f" (key {os.environ.get(args.echo_env, '')})"
    Path("rationale.md").write_text(rationale)
    runs = _count(args.state) if args.state else 0
    if runs < args.outside_first:
        Path("notes.txt").write_text("my scratch notes")
    print("edited", os.environ["GEPA_COMPONENT_FILES"])
    if not args.no_usage:
        print(json.dumps({"usage": {"input_tokens": 1200, "output_tokens": 80}, "cost_usd": 0.002}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
