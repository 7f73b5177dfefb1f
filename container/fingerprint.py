"""The program fingerprint: what makes a cached rollout result still valid.

sha256 over the canonical JSON of the protocol version, the target id, kind, version and
baseline (and user template), the target function's source and its module's source, every dataset row, the
splits and the verifier (its spec, or its source for a Python verifier). The candidate is
not in it (the cache key adds it), nor is the rollout policy.

A baseline read from a prompt file or the prompt registry enters as where it is read from,
not as its text: no rollout's result depends on it (a rollout is given every text of its
candidate), so a new version of the prompt keeps every cached rollout, and checking an edited
prompt file pays only for the new text.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import linecache
from typing import TYPE_CHECKING, Any

from schemas import PROTOCOL

if TYPE_CHECKING:
    from container.dataset import Dataset
    from container.splits import Splits
    from container.target import Target
    from container.verifiers import Verifier

__all__ = ["compute_fingerprint", "source_of"]


def compute_fingerprint(
    target: Target, dataset: Dataset, splits: Splits, verifier: Verifier
) -> str:
    """The hex sha256 fingerprint of a served program."""
    module = inspect.getmodule(target.fn)
    parts: dict[str, Any] = {
        "protocol": PROTOCOL,
        "target": {
            "id": target.id,
            "kind": target.kind,
            "version": target.version,
            "baseline": (
                {"source": target.baseline_source}
                if target.baseline_source
                else dict(target.baseline)
            ),
            "user_template": target.template.user_template if target.template else None,
        },
        "target_source": source_of(target.fn),
        "module_source": source_of(module) if module is not None else "",
        "dataset": dataset.rows(),
        "splits": splits.as_dict(),
        "verifier": verifier.spec,
    }
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def source_of(obj: Any) -> str:
    """The source text of a function, class or module; its bytecode when there is no source."""
    if not (
        inspect.isfunction(obj)
        or inspect.ismethod(obj)
        or inspect.isclass(obj)
        or inspect.ismodule(obj)
    ):
        obj = type(obj)  # a callable object: its class holds the code (a repr holds an address)
    try:
        filename = inspect.getsourcefile(obj)
        if filename:
            linecache.checkcache(filename)  # pick up an edited file in a long-lived process
        return inspect.getsource(obj)
    except (OSError, TypeError):
        code = getattr(obj, "__code__", None)
        if code is not None:
            return code.co_code.hex() + repr(code.co_consts)
        return repr(obj)
