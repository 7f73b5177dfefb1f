"""The two SDKs agree: the same rows give the same seed names and splits, the same verifier
gives the same score and feedback, the same parts give the same fingerprint, and the twin
agents give the same ``/program`` and ``/rollout`` answers.

The TypeScript side is asked through test/fixtures/oracle.ts (and real servers for the last).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from container import AgentResult, Task, load_dataset, load_splits, load_verifier, normalize_text
from optimizer.testing.toy import TOY_DATA, TOY_SPLITS
from schemas import Demo, UserError
from schemas.template import demos_to_text
from tests.conformance import node
from tests.conformance.conftest import TOKEN, Server
from tests.fakes.servers import ROOT

BANKING77 = ROOT / "examples" / "banking77"

QUIRKY_CSV = (
    "\ufeffid,text,label,extra\r\n"
    '1,"Hello, world",greet,a\r\n'
    "\r\n"
    '2,"multi\nline ""quoted""",greet\r\n'
    ',no name here,"",\r\n'
    '4,stray "quote,Ünïcode,z\r\n'
    ",short\r\n"
    "6,numbers,42,\r\n"
    "7,last line without newline,farewell,y"
)


def _python_side(path: Path, splits_file: Path | None) -> dict[str, Any]:
    dataset = load_dataset(path)
    splits = load_splits(dataset, splits_file)
    return {"tasks": [t.as_row() for t in dataset.tasks], "splits": splits.as_dict()}


def _typescript_side(path: Path, splits_file: Path | None) -> dict[str, Any]:
    answer = node.oracle(
        {"op": "dataset", "path": str(path), "splits_file": splits_file and str(splits_file)}
    )
    if "error" in answer:
        raise UserError(answer["error"])
    rows = [
        {k: t[k] for k in ("name", "input", "expected", "instruction", "metadata")}
        for t in answer["tasks"]
    ]
    return {"tasks": rows, "splits": answer["splits"]}


def _datasets(tmp: Path) -> list[tuple[Path, Path | None]]:
    quirky = tmp / "quirky.csv"
    quirky.write_text(QUIRKY_CSV, encoding="utf-8", newline="")
    folder = tmp / "folder"
    folder.mkdir()
    (folder / "train.jsonl").write_text(
        '{"text": "a", "label": "x"}\n\n{"text": "b", "label": "y"}\n'
    )
    (folder / "dev.json").write_text('[{"question": "c", "answer": 3, "instruction": 7}]')
    (folder / "test.csv").write_text("prompt,target\nd,z\n")
    (folder / "verifier.json").write_text('{"type": "exact"}')
    mixed = tmp / "mixed.jsonl"
    labels = [None, "a", 1, 2.5, True, {"k": [1, "é"]}, "b", "a", "😀", "b"]
    mixed.write_text(
        "".join(
            json.dumps({"name": f"m{i}", "input": i, "expected": v}) + "\n"
            for i, v in enumerate(labels * 4)
        )
    )
    splits = tmp / "splits.json"
    splits.write_text(
        json.dumps(
            {"train": ["cow-0", "cat-1", "cow-0"], "test": ["dog-2"], "validation": ["owl-1"]}
        )
    )
    return [
        (TOY_DATA, None),
        (TOY_DATA, TOY_SPLITS),
        (TOY_DATA, splits),
        (quirky, None),
        (folder, None),
        (mixed, None),
        (BANKING77 / "train.csv", None),
        (BANKING77 / "test.csv", None),
    ]


def test_the_same_rows_give_the_same_seed_names_and_splits(tmp_path: Path) -> None:
    for path, splits_file in _datasets(tmp_path):
        python = _python_side(path, splits_file)
        typescript = _typescript_side(path, splits_file)
        assert typescript["tasks"] == python["tasks"], path
        assert typescript["splits"] == python["splits"], (path, splits_file)
    assert len(python["tasks"]) == 3080  # Banking77's test file: every row named and split alike


BAD_FILES = {
    "no-input.jsonl": '{"name": "a", "text": "x"}\n\n{"name": "b", "label": "y"}\n',
    "null-input.jsonl": '{"text": "x"}\n{"text": null}\n',
    "blank-input.csv": 'id,text,label\nr1,"multi\nline",a\nr2,"  ",b\n',
    "empty-input.json": '[{"question": "q"}, {"question": {}}]',
    "long-row.csv": "text,label\nx,a\ny,b,extra\n",
    "duplicates.jsonl": '{"id": 1, "text": "x"}\n{"id": "1", "text": "y"}\n',
    "not-a-list.json": '{"text": "x"}',
}


def _refusal(side: Callable[[Path, Path | None], Any], path: Path, splits: Path | None) -> str:
    """The message of the refusal, up to the type it names (Python says dict, JavaScript object)."""
    with pytest.raises(UserError) as caught:
        side(path, splits)
    return str(caught.value).rsplit(", got ", 1)[0]


def test_bad_rows_and_splits_files_are_refused_by_both_with_the_same_message(
    tmp_path: Path,
) -> None:
    for name, text in BAD_FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        path = tmp_path / name
        python = _refusal(_python_side, path, None)
        assert _refusal(_typescript_side, path, None) == python, name
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"train": ["cow-0"], "holdout": ["cow-0", "nope"]}))
    python = _refusal(_python_side, TOY_DATA, bad)
    assert "1 seed(s) not in the dataset: nope" in python
    assert _refusal(_typescript_side, TOY_DATA, bad) == python


VALUES: list[Any] = [
    "plain",
    'é😀\u2028\x7f\x01"\\',
    {"b": [1, 2.5, None, True, False], "a": {"\u00e9": "x", "z": "\U0001f600"}, "\uffff": 0},
    # the known difference: a float with a small whole value (3.0) reads as an int in
    # JavaScript, and ints past 2**53 lose digits (see container/typescript/src/python.ts)
    [0.1, 1e-07, 1e16, 2.5e22, -0.0001, 5e-324, 123456789.123, 9007199254740991],
    {"nested": [{"k": []}, {}]},
    -42,
]
OPTIONS = [
    {},
    {"sortKeys": True},
    {"sortKeys": True, "separators": [",", ":"]},
    {"ensureAscii": False, "sortKeys": True},
    {"indent": 1, "ensureAscii": False},
]
PY_OPTIONS = [
    {},
    {"sort_keys": True},
    {"sort_keys": True, "separators": (",", ":")},
    {"ensure_ascii": False, "sort_keys": True},
    {"indent": 1, "ensure_ascii": False},
]


def test_canonical_json_and_the_fingerprint_hash_are_python_s() -> None:
    cases = [[v, o] for v in VALUES for o in OPTIONS]
    expected = [json.dumps(v, **o) for v in VALUES for o in PY_OPTIONS]  # type: ignore[arg-type]
    assert node.oracle({"op": "dumps", "cases": cases}) == expected
    parts = {"protocol": "gepa-container/1", "dataset": VALUES, "verifier": "x"}
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    assert (
        node.oracle({"op": "fingerprint", "parts": parts})
        == hashlib.sha256(canonical.encode()).hexdigest()
    )


TEXTS: list[Any] = [
    "Card_Arrival!!",
    "  STRAẞE—straße  ",
    "ΣΊΣΥΦΟΣ",
    "ﬁnal\u00a0answer\x1c\x85x",
    "e\u0301",
    {"b": 1, "a": "X"},
    ["x", None],
    42,
    None,
    "¿Qué? ¡Sí! «ok» (yes) [no] {maybe} #tag @user 50% a/b",
]


def test_normalized_text_is_python_s() -> None:
    assert node.oracle({"op": "normalize", "values": TEXTS}) == [normalize_text(v) for v in TEXTS]


VERIFY: list[tuple[dict[str, Any], Any, Any]] = [
    ({"type": "exact"}, "card_arrival", "card_arrival"),
    ({"type": "exact"}, {"a": 1}, '{"a": 1}'),
    ({"type": "normalized"}, "Card arrival", "card_arrival."),
    ({"type": "normalized"}, "x", "y" * 300),
    ({"type": "normalized"}, None, "x"),
    ({"type": "contains"}, "Paris", "The answer is PARIS."),
    ({"type": "contains", "case_sensitive": True}, "Paris", "paris"),
    ({"type": "regex", "pattern": "^[0-9]+$"}, None, "123"),
    ({"type": "regex", "pattern": "yes|no", "ignore_case": True}, None, "Maybe"),
    ({"type": "json_field", "field": "intent"}, "refund", '{"intent": "Refund"}'),
    ({"type": "json_field", "field": "a.1"}, 2, {"a": [1, 2]}),
    ({"type": "json_field", "field": "a.b"}, 1, '{"a": {}}'),
    ({"type": "json_field", "field": "x"}, 1, "not json"),
    ({"type": "json_field", "field": "ok"}, 1, {"ok": True}),
    ({"type": "numeric"}, "1,234.5", "The total is 1234.5 dollars"),
    ({"type": "numeric", "abs_tol": 0.01}, 3.14159, "about 3.14"),
    ({"type": "numeric", "rel_tol": 0.1}, 100, "-95"),
    ({"type": "numeric"}, 7, "no digits"),
    ({"type": "numeric"}, "n/a", "7"),
    ({"type": "numeric"}, 1234567, "1.5e6"),
    ({"type": "numeric"}, "٣", "3"),
]


async def _python_verify(spec: dict[str, Any], expected: Any, output: Any) -> list[Any]:
    verifier = load_verifier(spec)
    task = Task(name="seed", input="q", expected=expected)
    try:
        score = await verifier.score(task, AgentResult(output=output))
    except UserError as exc:
        return ["UserError", str(exc)]
    return [score.score, score.feedback]


def _without_hint(answer: list[Any]) -> list[Any]:
    """A refusal without the verifiers it suggests (only Python has llm_judge, module:function)."""
    if answer[0] != "UserError":
        return answer
    return [answer[0], answer[1].split(" (a regex", 1)[0]]


def test_verifiers_give_the_same_scores_and_feedback() -> None:
    async def all_python() -> list[list[Any]]:
        return [await _python_verify(*case) for case in VERIFY]

    python = asyncio.run(all_python())
    typescript = node.oracle({"op": "verify", "cases": [list(c) for c in VERIFY]})
    for case, py, ts in zip(VERIFY, python, typescript, strict=True):
        assert _without_hint(ts) == _without_hint(py), case
    specs = [spec for spec, _, _ in VERIFY]
    assert node.oracle({"op": "spec", "specs": specs}) == [load_verifier(s).spec for s in specs]


def test_the_demos_component_text_is_python_s() -> None:
    demos = [Demo(input={"question": "2+2", "é": [1]}, output="4"), Demo(input="x", output="y")]
    wire = [d.model_dump(mode="json") for d in demos]
    assert node.oracle({"op": "demos", "demos": wire}) == demos_to_text(tuple(demos))


def _comparable(body: dict[str, Any]) -> dict[str, Any]:
    """The answer without what may differ: the fingerprint (it hashes the agent's source),
    the latency, and the fix hints after a warning's first colon (only the Python SDK has
    ``llm_judge`` and ``module:function`` verifiers to suggest)."""
    body = json.loads(json.dumps(body))
    body.pop("fingerprint", None)
    if "usage" in body:
        body["usage"].pop("latency_ms")
    warnings = body.get("metadata", {}).get("warnings")
    if warnings:
        body["metadata"]["warnings"] = [w.split(":", 1)[0] for w in warnings]
    return body


@pytest.mark.e2e
@pytest.mark.parametrize("kind", ["", "-template"])
def test_the_twin_agents_answer_alike(kind: str, start: Callable[[str], Server]) -> None:
    python, typescript = start(f"python{kind}"), start(f"node{kind}")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    programs = [httpx.get(f"{s.url}/program", headers=auth).json() for s in (python, typescript)]
    assert _comparable(programs[1]) == _comparable(programs[0])
    assert len(programs[0]["metadata"]["warnings"]) == 1  # the row without a label, or a field
    if kind:
        candidates = [
            {"system_prompt": "Add.", "demos": '[{"input": {"question": "1+1"}, "output": "2"}]'}
        ]
        seeds = ["t-0", "t-1"]
    else:
        candidates = [{"system_prompt": "Echo it."}, {"system_prompt": "Be quiet."}]
        seeds = [f"echo-{i}" for i in range(5)]
    for candidate in candidates:
        for seed in seeds:
            for extra in ({}, {"return_trace": False}, {"policy": {"model": "m-1"}}):
                body = {"candidate": candidate, "seed": seed, **extra}
                answers = [
                    httpx.post(f"{s.url}/rollout", json=body, headers=auth, timeout=30)
                    for s in (python, typescript)
                ]
                assert [a.status_code for a in answers] == [200, 200], answers[1].text
                assert _comparable(answers[1].json()) == _comparable(answers[0].json()), body
