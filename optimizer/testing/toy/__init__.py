"""The toy-labels program tests and benches run against: each seed asks for a label, and a
rollout is right when the candidate's prompt names it.

Files, not imports (importing a container module registers its target):

- :data:`TOY_CONTAINER`: the program as an SDK container module (``gepa-runtime container``);
- :data:`CAPACITY_CONTAINER`: the same program as a plain gepa-container/1 app with a hidden
  capacity, a latency and a rate limit (a script: ``python capacity_container.py --port N``);
- :data:`TOY_DATA` and :data:`TOY_SPLITS`: its dataset and splits.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CAPACITY_CONTAINER", "TOY", "TOY_CONTAINER", "TOY_DATA", "TOY_SPLITS"]

TOY = Path(__file__).resolve().parent
TOY_CONTAINER = TOY / "toy_container.py"
CAPACITY_CONTAINER = TOY / "capacity_container.py"
TOY_DATA = TOY / "toy_data.jsonl"
TOY_SPLITS = TOY / "toy_splits.json"
