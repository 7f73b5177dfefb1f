"""Verifiers: ``(task, result) -> Score | (score, feedback) | float``, built-in or user code.

``load_verifier`` takes a verifier JSON file, a built-in type name, a spec dict, a
``module:function`` string or a callable. Built-ins write feedback the proposer can act on:
``"correct: predicted X"`` on a match, ``"predicted X, expected Y"`` otherwise. With no
verifier at all the default is ``normalized``. User verifiers that are plain functions run in a
worker thread; async ones are awaited. A built-in that compares against the row's expected
value (``needs_label``) raises ``UserMistake("MissingLabel")`` for a row without one: a 422,
since every retry would fail the same way.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread

from container.dataset import EXPECTED_COLUMNS
from container.faults import UserMistake
from container.judge import make_llm_judge
from container.results import AgentResult, Score, coerce_score
from container.source import source_of
from container.specs import BUILTIN_TYPES, LlmJudgeSpec, parse_spec
from container.target import is_async_callable
from container.task import Task
from schemas import UserError

__all__ = ["DEFAULT_VERIFIER", "Verifier", "load_verifier", "normalize_text"]

DEFAULT_VERIFIER = "normalized"
LABELLED_TYPES = frozenset({"exact", "normalized", "contains", "json_field", "numeric"})
VerifierFn = Callable[[Task, AgentResult], Any]


@dataclass(frozen=True)
class Verifier:
    """A named scoring function. ``spec`` is what the program fingerprint hashes.

    ``needs_label`` is true for the built-ins that compare the output with the row's expected
    value, so rows without one can be named before any rollout.
    """

    name: str
    spec: str
    fn: VerifierFn
    in_thread: bool = False
    needs_label: bool = False

    async def score(self, task: Task, result: AgentResult) -> Score:
        """Score one rollout; the verifier's return value is coerced to a ``Score``."""
        if self.in_thread:
            value = await anyio.to_thread.run_sync(self.fn, task, result)
        else:
            value = self.fn(task, result)
        if inspect.isawaitable(value):
            value = await value
        return coerce_score(value, verifier=self.name)


def load_verifier(value: Any = None) -> Verifier:
    """A ``Verifier`` from a path, a built-in name, a spec dict, ``module:function`` or a callable."""
    if value is None:
        return _builtin({"type": DEFAULT_VERIFIER}, DEFAULT_VERIFIER)
    if isinstance(value, Verifier):
        return value
    if isinstance(value, dict):
        return _builtin(value, "verifier spec")
    if isinstance(value, str | Path):
        text = str(value)
        path = Path(text)
        if path.suffix.lower() == ".json" or path.is_file():
            return _builtin(_read_json(path), f"verifier file {path}")
        if text in BUILTIN_TYPES:
            return _builtin({"type": text}, text)
        if ":" in text:
            from container.loader import import_attribute  # loader imports user code; keep it lazy

            return _callable(import_attribute(text), text)
        raise UserError(
            f"verifier {text!r} is not a JSON file, a built-in type ({', '.join(BUILTIN_TYPES)}) "
            "nor a module:function"
        )
    if callable(value):
        return _callable(value, _qualname(value))
    raise UserError(f"cannot use {type(value).__name__} as a verifier")


def normalize_text(value: Any) -> str:
    """Case-folded text without punctuation (``_``/``-`` become spaces), whitespace collapsed."""
    chars = []
    for ch in unicodedata.normalize("NFKC", _text(value)).casefold():
        category = unicodedata.category(ch)
        if category in ("Pc", "Pd"):
            chars.append(" ")
        elif not category.startswith("P"):
            chars.append(ch)
    return " ".join("".join(chars).split())


def _callable(fn: Any, name: str) -> Verifier:
    if not callable(fn):
        raise UserError(f"verifier {name} is not callable")
    source = source_of(fn)
    return Verifier(
        name=name, spec=f"{_qualname(fn)}\n{source}", fn=fn, in_thread=not is_async_callable(fn)
    )


def _builtin(data: Any, where: str) -> Verifier:
    spec = parse_spec(data, where=where)
    canonical = json.dumps(spec.model_dump(mode="json"), sort_keys=True)
    if isinstance(spec, LlmJudgeSpec):
        fn: VerifierFn = make_llm_judge(spec)
    else:
        fn = _BUILTINS[spec.type](spec)
    return Verifier(name=spec.type, spec=canonical, fn=fn, needs_label=spec.type in LABELLED_TYPES)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read verifier file {path}: {exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"verifier file {path} is not valid JSON: {exc}") from exc


def _qualname(fn: Any) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', type(fn).__name__)}"


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _short(value: Any, limit: int = 200) -> str:
    text = _text(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def missing_label_fix(verifier: str) -> str:
    """What to do about rows without an expected value under a ``verifier`` that needs one."""
    return (
        f"the {verifier} verifier compares the output with it: add an expected/label/answer "
        f"value to the row (the label is read from the first of the columns "
        f"{', '.join(EXPECTED_COLUMNS)}; others are metadata), or pass --verifier with one "
        "that needs none (a regex or llm_judge spec, or your own module:function)"
    )


def _expected(task: Task, verifier: str) -> Any:
    if task.expected is None:
        raise UserMistake(
            "MissingLabel",
            f"seed {task.name!r} has no expected value; {missing_label_fix(verifier)}",
        )
    return task.expected


def _verdict(ok: bool, predicted: str, expected: str, note: str = "") -> Score:
    if ok:
        return Score(score=1.0, feedback=f"correct: predicted {predicted}{note}")
    return Score(score=0.0, feedback=f"predicted {predicted}, expected {expected}{note}")


def _exact(spec: Any) -> VerifierFn:
    def verify(task: Task, result: AgentResult) -> Score:
        expected = _expected(task, "exact")
        ok = _text(result.output) == _text(expected)
        return _verdict(ok, _short(result.output), _short(expected))

    return verify


def _normalized(spec: Any) -> VerifierFn:
    def verify(task: Task, result: AgentResult) -> Score:
        expected = _expected(task, "normalized")
        ok = normalize_text(result.output) == normalize_text(expected)
        return _verdict(ok, _short(result.output), _short(expected))

    return verify


def _contains(spec: Any) -> VerifierFn:
    def verify(task: Task, result: AgentResult) -> Score:
        expected = _expected(task, "contains")
        out, exp = _text(result.output), _text(expected)
        ok = exp in out if spec.case_sensitive else exp.casefold() in out.casefold()
        return _verdict(ok, _short(out), f"it to contain {_short(exp)}")

    return verify


def _regex(spec: Any) -> VerifierFn:
    pattern = re.compile(spec.pattern, re.IGNORECASE if spec.ignore_case else 0)

    def verify(task: Task, result: AgentResult) -> Score:
        ok = pattern.search(_text(result.output)) is not None
        note = f" (matches /{spec.pattern}/)" if ok else ""
        return _verdict(ok, _short(result.output), f"a match for /{spec.pattern}/", note)

    return verify


def _json_field(spec: Any) -> VerifierFn:
    def verify(task: Task, result: AgentResult) -> Score:
        expected = _expected(task, "json_field")
        want = f"{spec.field}={_short(expected)}"
        value = result.output
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                return _verdict(
                    False, _short(result.output), want, " (the output is not valid JSON)"
                )
        for part in spec.field.split("."):
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                return _verdict(False, _short(result.output), want, f" (no field {spec.field})")
        ok = value == expected or normalize_text(value) == normalize_text(expected)
        return _verdict(ok, f"{spec.field}={_short(value)}", want)

    return verify


_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def _first_number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    match = _NUMBER.search(_text(value))
    return float(match.group().replace(",", "")) if match else None


def _numeric(spec: Any) -> VerifierFn:
    def verify(task: Task, result: AgentResult) -> Score:
        expected = _first_number(_expected(task, "numeric"))
        if expected is None:
            raise UserMistake(
                "BadLabel",
                f"seed {task.name!r}: expected value {task.expected!r} is not a number; the "
                "numeric verifier needs a number there (fix the row, or use another verifier)",
            )
        got = _first_number(result.output)
        tolerance = f" (tolerance abs {spec.abs_tol:g}, rel {spec.rel_tol:g})"
        if got is None:
            return _verdict(
                False, _short(result.output), f"{expected:g}", " (no number in the output)"
            )
        ok = math.isclose(got, expected, rel_tol=spec.rel_tol, abs_tol=spec.abs_tol)
        return _verdict(ok, f"{got:g}", f"{expected:g}", tolerance)

    return verify


_BUILTINS: dict[str, Callable[[Any], VerifierFn]] = {
    "exact": _exact,
    "normalized": _normalized,
    "contains": _contains,
    "regex": _regex,
    "json_field": _json_field,
    "numeric": _numeric,
}
