"""A DSPy program as a task container (the ``[dspy]`` extra: DSPy 3.x).

    import dspy
    from container.dspy import serve_program

    dspy.configure(lm=dspy.LM("openai/gpt-4.1-mini"))
    serve_program(MyProgram(), trainset=train, metric=metric, holdout=test, port=8100)

then ``gepa-runtime optimize run --container http://127.0.0.1:8100 ...`` as for any container.
``gepa-runtime container --dspy module:program --dataset rows.jsonl --metric module:metric``
serves one from the command line.

- **Components**: each predictor's instructions, named as ``program.named_predictors()``
  names them (``guess``, ``pipeline.answer``); with ``search_demos=True`` also each
  predictor's demos, as a JSON list of example dicts named ``<predictor>.demos`` (MIPRO
  picks demo sets; GEPA may edit them).
- **Seeds**: the examples (``train-0000``, ``val-0000``, ``holdout-0000``), their input
  fields as the task's input (``example.inputs()``), the other fields as its expected value.
- **Score**: the metric, called as ``metric(gold, pred)``: a number or bool is the score; a
  GEPA-style ``dspy.Prediction(score=..., feedback=...)`` (or a dict) gives the feedback too.
  An LM answer DSPy cannot parse (``dspy.AdapterParseError``) is the student's failure: it
  scores 0 with the parser's message as feedback (never retried as an infrastructure fault).
- **Trace**: the program's LM history for that call: every request's messages and the
  model's answer, in order, with their usage and cost.
- **Student**: the program's own ``dspy.LM`` (``lm=``, else ``dspy.settings.lm``), copied per
  rollout so each rollout has a history of its own; a rollout whose policy names a model
  (``--task-model``, ``--student-models``) runs on a copy of that LM with that model. The
  optimizer never calls it.

:func:`apply_candidate` writes a candidate's components into a copy of the program;
``gepa-runtime runs export RID --dspy out.json`` does that for a run's best and saves it with
DSPy's ``save``, which ``program.load(path)`` reads back.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from container.dataset import Dataset
from container.results import AgentResult, Score
from container.splits import Splits
from container.target import Target
from container.task import Candidate, Task
from container.verifiers import Verifier
from schemas import UserError

__all__ = ["apply_candidate", "dspy_app", "dspy_components", "dspy_target", "serve_program"]

DEMOS_SUFFIX = ".demos"
PARSE_ERROR = "parse_error"  # the output of a rollout whose LM answer DSPy could not parse
Metric = Callable[..., Any]


def load_dspy() -> Any:
    """``import dspy``, or the install command; LiteLLM told to use its bundled price map."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch on import
    try:
        import dspy
    except ImportError:
        raise UserError(
            "serving a DSPy program needs DSPy: pip install 'gepa-runtime[dspy]'"
        ) from None
    return dspy


def dspy_components(program: Any, *, search_demos: bool = False) -> dict[str, str]:
    """The program's components: each predictor's instructions (and demos, when searched)."""
    components: dict[str, str] = {}
    for name, predictor in program.named_predictors():
        components[name] = predictor.signature.instructions
        if search_demos:
            components[name + DEMOS_SUFFIX] = json.dumps(
                [dict(demo.items()) for demo in predictor.demos], ensure_ascii=False
            )
    if not components:
        raise UserError("the DSPy program has no predictors (dspy.Predict, ChainOfThought, ...)")
    return components


def apply_candidate(program: Any, components: Mapping[str, str]) -> Any:
    """A deep copy of ``program`` with ``components`` written into its predictors."""
    dspy = load_dspy()
    copy = program.deepcopy()
    for name, predictor in copy.named_predictors():
        if name in components:
            predictor.signature = predictor.signature.with_instructions(components[name])
        demos = components.get(name + DEMOS_SUFFIX)
        if demos is not None:
            try:
                rows = json.loads(demos)
            except json.JSONDecodeError as exc:
                raise UserError(
                    f"component {name}{DEMOS_SUFFIX} is not a JSON list: {exc}"
                ) from None
            if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                raise UserError(f"component {name}{DEMOS_SUFFIX} must be a JSON list of objects")
            predictor.demos = [dspy.Example(**row) for row in rows]
    return copy


def _trace(history: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], int, int, float]:
    """Messages of every LM call (requests and answers) and the summed usage and cost."""
    messages: list[dict[str, Any]] = []
    tokens_in = tokens_out = 0
    cost = 0.0
    for entry in history:
        messages += [dict(m) for m in entry.get("messages") or []]
        messages += [{"role": "assistant", "content": str(o)} for o in entry.get("outputs") or []]
        usage = entry.get("usage") or {}
        tokens_in += int(usage.get("prompt_tokens") or 0)
        tokens_out += int(usage.get("completion_tokens") or 0)
        cost += float(entry.get("cost") or 0.0)
    return messages, tokens_in, tokens_out, cost


def _student(lm: Any) -> Any:
    dspy = load_dspy()
    student = lm if lm is not None else dspy.settings.lm
    if student is None:
        raise UserError(
            "the DSPy program has no LM: pass lm=dspy.LM(...) or call dspy.configure(lm=...)"
        )
    return student


def dspy_target(
    program: Any,
    *,
    lm: Any = None,
    id: str = "dspy-program",
    description: str = "",
    search_demos: bool = False,
) -> Target:
    """The target serving ``program`` (see the module docstring)."""
    dspy = load_dspy()
    student = _student(lm)
    baseline = dspy_components(program, search_demos=search_demos)

    def run(task: Task, candidate: Candidate) -> AgentResult:
        own = student.copy(model=candidate.model) if candidate.model else student.copy()
        copy = apply_candidate(program, candidate.components)
        try:
            with dspy.context(lm=own):
                output = dict(copy(**dict(task.input)).items())
        except dspy.AdapterParseError as exc:  # the student's answer: scored, not retried
            output = {PARSE_ERROR: str(exc)[:2000]}
        messages, tokens_in, tokens_out, cost = _trace(own.history)
        return AgentResult(
            output=output,
            messages=messages,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cost_usd=cost,
        )

    state = {k: v for k, v in student.dump_state().items() if "key" not in k.lower()}
    return Target(
        id=id,
        kind="prompt",
        description=description
        or f"Instructions of a predictor of the DSPy program {type(program).__name__}.",
        baseline=baseline,
        fn=run,
        version=json.dumps({"dspy": dspy.__version__, "lm": state}, sort_keys=True, default=str),
        module=type(program).__module__,
    )


def _metric_verifier(metric: Metric) -> Verifier:
    """The DSPy metric as a verifier: ``metric(gold, pred)`` -> Score and feedback."""
    dspy = load_dspy()

    def score(task: Task, result: AgentResult) -> Score:
        if isinstance(result.output, dict) and PARSE_ERROR in result.output:
            return Score(
                score=0.0, feedback=f"the answer did not parse: {result.output[PARSE_ERROR]}"
            )
        gold = dspy.Example(**dict(task.input), **dict(task.expected or {}))
        gold = gold.with_inputs(*task.input)
        pred = dspy.Prediction(**(result.output if isinstance(result.output, dict) else {}))
        value = metric(gold, pred)
        if isinstance(value, Mapping):
            score, feedback = value.get("score"), value.get("feedback")
        elif hasattr(value, "score"):
            score, feedback = value.score, getattr(value, "feedback", None)
        else:
            score, feedback = value, None
        if not isinstance(score, int | float):  # bools are ints: True scores 1
            raise UserError(f"the DSPy metric returned {score!r}: return a number or score=")
        return Score(score=float(score), feedback=str(feedback or ""))

    name = getattr(metric, "__qualname__", type(metric).__name__)
    try:
        source = inspect.getsource(metric)
    except (OSError, TypeError):
        source = ""
    return Verifier(name=f"dspy metric {name}", spec=f"{name}\n{source}", fn=score, in_thread=True)


def _dataset(
    trainset: Sequence[Any], valset: Sequence[Any], holdout: Sequence[Any]
) -> tuple[Dataset, Splits]:
    tasks: list[Task] = []
    names: dict[str, list[str]] = {"train": [], "val": [], "holdout": []}
    for split, examples in (("train", trainset), ("val", valset), ("holdout", holdout)):
        for i, example in enumerate(examples):
            inputs = example.inputs()
            name = f"{split}-{i:04d}"
            labels = {k: v for k, v in example.items() if k not in inputs}
            tasks.append(Task(name=name, input=dict(inputs.items()), expected=labels, split=split))
            names[split].append(name)
    if not names["train"]:
        raise UserError("trainset is empty: give the examples to optimize on")
    splits = Splits(tuple(names["train"]), tuple(names["val"]), tuple(names["holdout"]))
    return Dataset(tasks=tuple(tasks), source="dspy examples"), splits


def dspy_app(
    program: Any,
    *,
    trainset: Sequence[Any],
    metric: Metric,
    holdout: Sequence[Any] = (),
    valset: Sequence[Any] = (),
    lm: Any = None,
    search_demos: bool = False,
    id: str = "dspy-program",
    token: str | None = None,
) -> Any:
    """The Starlette app of the container (what :func:`serve_program` serves)."""
    from container.app import create_app

    target = dspy_target(program, lm=lm, id=id, search_demos=search_demos)
    dataset, splits = _dataset(trainset, valset, holdout)
    return create_app(
        target, dataset=dataset, splits=splits, verifier=_metric_verifier(metric), token=token
    )


def serve_program(
    program: Any,
    *,
    trainset: Sequence[Any],
    metric: Metric,
    holdout: Sequence[Any] = (),
    valset: Sequence[Any] = (),
    lm: Any = None,
    search_demos: bool = False,
    id: str = "dspy-program",
    host: str = "127.0.0.1",
    port: int = 8100,
    token: str | None = None,
) -> None:
    """Serve ``program`` as a task container until interrupted (uvicorn on ``host:port``)."""
    import uvicorn

    app = dspy_app(
        program, trainset=trainset, metric=metric, holdout=holdout, valset=valset, lm=lm,
        search_demos=search_demos, id=id, token=token,
    )  # fmt: skip
    uvicorn.run(app, host=host, port=port, log_level="warning")


def save_components(components: Mapping[str, str], path: str | os.PathLike[str]) -> None:
    """Write ``components`` (a DSPy container's candidate) with DSPy's ``save``, as the
    state ``program.load(path)`` reads: each predictor's instructions, and its demos when
    they were searched (else the program keeps its own). Field prefixes are left as they are."""
    dspy = load_dspy()
    state: dict[str, Any] = {}
    for name, text in components.items():
        if name.endswith(DEMOS_SUFFIX):
            continue
        entry: dict[str, Any] = {"signature": {"instructions": text, "fields": []}, "lm": None}
        if name + DEMOS_SUFFIX in components:
            entry["demos"] = json.loads(components[name + DEMOS_SUFFIX])
        state[name] = entry

    class _Saved(dspy.Module):  # type: ignore[misc,name-defined]
        """A module whose state is the candidate's, so DSPy's own save writes it."""

        def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
            return dict(state)

    _Saved().save(str(path))


def dspy_app_from_specs(
    program_spec: str,
    *,
    metric_spec: str | None,
    dataset: str | None,
    splits: str | None = None,
    search_demos: bool = False,
    token: str | None = None,
) -> Any:
    """``gepa-runtime container --dspy module:program --metric module:metric --dataset ...``.

    The dataset is the SDK's (:mod:`container.dataset`): each row's ``input`` object holds
    the program's input fields and its ``expected`` object the other fields of the example.
    ``module:program`` names a ``dspy.Module`` instance, or a class or function that makes
    one; its LM is the one the module configured (``dspy.configure(lm=...)``).
    """
    from container.app import create_app
    from container.dataset import load_dataset
    from container.loader import import_attribute
    from container.splits import load_splits

    dspy = load_dspy()
    if not metric_spec:
        raise UserError("--dspy needs --metric module:function (the DSPy metric)")
    if not dataset:
        raise UserError("--dspy needs --dataset PATH: rows with input and expected objects")
    program = import_attribute(program_spec)
    if not isinstance(program, dspy.Module) and callable(program):
        program = program()
    if not isinstance(program, dspy.Module):
        raise UserError(f"--dspy {program_spec} is not a dspy.Module (nor makes one)")
    data = load_dataset(dataset)
    for task in data.tasks:
        if not isinstance(task.expected, Mapping):
            raise UserError(
                f"row {task.name}: expected must be an object of the example's other fields "
                '(e.g. {"answer": "cow"}), got ' + repr(task.expected)[:80]
            )
    target = dspy_target(program, id=program_spec.rsplit(":", 1)[-1], search_demos=search_demos)
    return create_app(
        target,
        dataset=data,
        splits=load_splits(data, splits),
        verifier=_metric_verifier(import_attribute(metric_spec)),
        token=token,
    )
