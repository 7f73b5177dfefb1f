"""The ``@optimize`` decorator, the ``Target`` it describes, and the registry of targets.

A target is a function ``(task, candidate) -> AgentResult | str | dict`` (sync or async)
plus the surface the optimizer may rewrite: one or several named components with their
baseline text. Decorating registers it in a ``Registry``; the default registry backs the
module-level helpers ``list_optimization_targets`` and friends.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from container.prompts import load_components, prompt_source
from schemas import COMPONENT_KINDS, Objective, PromptTemplate, UserError
from schemas.template import DEMOS_COMPONENT, SYSTEM_COMPONENT

__all__ = [
    "DEFAULT_COMPONENT",
    "Registry",
    "Target",
    "clear_optimization_targets",
    "default_registry",
    "get_optimization_target",
    "is_async_callable",
    "list_optimization_targets",
    "optimize",
]

DEFAULT_COMPONENT = "system_prompt"
TargetFn = Callable[..., Any]
DEMOS_DESCRIPTION = (
    "Few-shot examples shown to the model before the task, as a JSON list of "
    '{"input": ..., "output": "..."} objects (each input renders through the user template '
    "USER_TEMPLATE). Keep it a valid JSON list; an empty list [] means zero-shot."
)


@dataclass(frozen=True)
class Target:
    """A decorated function and everything the container needs to serve it."""

    id: str
    kind: str
    description: str
    baseline: Mapping[str, str]
    fn: TargetFn
    verifier: Any = None
    dataset: str | None = None
    version: str = ""
    module: str = ""
    template: PromptTemplate | None = None
    # The prompt file or registry URI the baseline was read from, as given (``None``: text).
    baseline_source: str | None = None
    # The verifier's metrics by name with their direction, for GET /program (default: maximised).
    objectives: Mapping[str, str] = field(default_factory=dict)

    def declared_objectives(self) -> list[str | Objective]:
        """``GET /program``'s ``objectives``: ``reward``, then each declared metric."""
        declared = [
            Objective.model_validate({"name": n, "direction": d})
            for n, d in self.objectives.items()
        ]
        return ["reward", *declared]

    @property
    def component_names(self) -> tuple[str, ...]:
        """The component names, in declaration order."""
        return tuple(self.baseline)

    def component_description(self, name: str) -> str:
        """What the optimizer is told about one component."""
        if self.template is not None and name == DEMOS_COMPONENT:
            return DEMOS_DESCRIPTION.replace("USER_TEMPLATE", repr(self.template.user_template))
        return self.description

    def template_metadata(self) -> dict[str, Any] | None:
        """How the components map onto a prompt template (``GET /program`` metadata)."""
        if self.template is None:
            return None
        return {
            "user_template": self.template.user_template,
            "instruction_component": SYSTEM_COMPONENT,
            "demos_component": DEMOS_COMPONENT,
        }


@dataclass
class Registry:
    """Targets by id. ``default_registry`` is the one the decorator uses unless told otherwise."""

    targets: dict[str, Target] = field(default_factory=dict)

    def register(self, target: Target) -> None:
        """Add ``target``; re-registering the same function (a module reload) replaces it."""
        old = self.targets.get(target.id)
        if old is not None and _origin(old.fn) != _origin(target.fn):
            raise UserError(
                f"optimization target id {target.id!r} is already used by {_origin(old.fn)}; "
                "give each target a unique id"
            )
        self.targets[target.id] = target

    def get(self, target_id: str) -> Target:
        """The target with this id, or a ``UserError`` listing the known ids."""
        try:
            return self.targets[target_id]
        except KeyError:
            known = ", ".join(sorted(self.targets)) or "none"
            raise UserError(f"no optimization target {target_id!r}; registered: {known}") from None

    def list(self) -> list[Target]:
        """All targets, in registration order."""
        return list(self.targets.values())

    def clear(self) -> None:
        """Forget every target (tests use this between cases)."""
        self.targets.clear()


default_registry = Registry()


def optimize(
    *,
    id: str,
    kind: str = "prompt",
    description: str = "",
    baseline: str | os.PathLike[str] | Mapping[str, str] | PromptTemplate,
    verifier: Any = None,
    dataset: str | Path | None = None,
    component: str = DEFAULT_COMPONENT,
    version: str = "",
    registry: Registry | None = None,
    objectives: Mapping[str, str] | None = None,
) -> Callable[[TargetFn], TargetFn]:
    """Register the decorated function as an optimization target and return it unchanged.

    ``baseline`` is the starting text of one component (named ``component``, by default
    ``system_prompt``), a mapping of component name to text for a multi-component program,
    or a ``PromptTemplate``: then the components are ``system_prompt`` and ``demos`` and the
    target reads the candidate's template as ``candidate.template``. It may also name where
    the application keeps its prompt (:mod:`container.prompts`): a prompt file (a ``Path``,
    or a one-line string ending in ``.txt``, ``.md``, ``.prompt``, ``.json`` or ``.yaml``)
    or a registry version (``prompts:/NAME@ALIAS``), read now.
    ``verifier`` is a callable, a verifier JSON path, a ``module:function`` spec or a spec
    dict; ``dataset`` is the default ``--dataset``. Relative paths are resolved against the
    decorated function's file when they exist there. ``version`` is folded into the program
    fingerprint: bump it when something outside the code (e.g. the student model) changes.
    ``objectives`` names the verifier's metrics (``Score(metrics=...)``) that are minimised,
    or maximised, as ``{"toxicity": "minimize"}``: the optimizer's ``--select best-under``
    can bound them (cost, latency and prompt length it measures itself).
    """
    if not id or not isinstance(id, str):
        raise UserError("@optimize needs a non-empty string id=")
    if kind not in COMPONENT_KINDS:
        raise UserError(
            f"@optimize(id={id!r}) has kind={kind!r}; allowed kinds: {', '.join(COMPONENT_KINDS)}"
        )
    declared = _objectives(id, objectives)
    template = baseline if isinstance(baseline, PromptTemplate) else None
    fixed: dict[str, str] | None = None  # a template's or a mapping's, checked now
    if template is not None:
        fixed = template.to_components()
    elif not isinstance(baseline, str | os.PathLike):
        fixed = _components(id, baseline, component)

    def decorate(fn: TargetFn) -> TargetFn:
        if not callable(fn):
            raise UserError(f"@optimize(id={id!r}) must decorate a function")
        source = None if fixed is not None else prompt_source(baseline, _folder_of(fn))
        if fixed is not None:
            components = fixed
        elif source is not None:
            components = load_components(source, component=component or DEFAULT_COMPONENT)
        else:
            components = _components(id, baseline, component)
        target = Target(
            id=id,
            kind=kind,
            description=description,
            baseline=components,
            fn=fn,
            verifier=_resolve_path(fn, verifier) if isinstance(verifier, str | Path) else verifier,
            dataset=_resolve_path(fn, dataset) if dataset is not None else None,
            version=version,
            module=getattr(fn, "__module__", "") or "",
            template=template,
            baseline_source=None if source is None else str(baseline),
            objectives=declared,
        )
        (registry or default_registry).register(target)
        fn.__gepa_target__ = target  # type: ignore[attr-defined]
        return fn

    return decorate


def list_optimization_targets() -> list[Target]:
    """Every target registered with the default registry."""
    return default_registry.list()


def get_optimization_target(target_id: str) -> Target:
    """The target with this id from the default registry (``UserError`` if unknown)."""
    return default_registry.get(target_id)


def clear_optimization_targets() -> None:
    """Empty the default registry."""
    default_registry.clear()


def is_async_callable(fn: Any) -> bool:
    """True for an ``async def`` function or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def _objectives(target_id: str, objectives: Mapping[str, str] | None) -> dict[str, str]:
    """``objectives=`` checked: metric names to ``maximize`` or ``minimize``."""
    out = dict(objectives or {})
    bad = {n: d for n, d in out.items() if d not in ("maximize", "minimize") or n == "reward"}
    if bad:
        raise UserError(
            f"@optimize(id={target_id!r}) objectives={bad!r}: give each metric's name (not "
            "'reward', always maximised) and 'maximize' or 'minimize'"
        )
    return out


def _components(target_id: str, baseline: Any, component: str) -> dict[str, str]:
    if isinstance(baseline, str):
        if not component:
            raise UserError(f"@optimize(id={target_id!r}) needs a non-empty component= name")
        return {component: baseline}
    if isinstance(baseline, Mapping) and baseline:
        bad = [
            str(k)
            for k, v in baseline.items()
            if not (isinstance(k, str) and k and isinstance(v, str))
        ]
        if bad:
            raise UserError(
                f"@optimize(id={target_id!r}) baseline must map component names to text; "
                f"bad entries: {', '.join(bad)}"
            )
        return dict(baseline)
    raise UserError(
        f"@optimize(id={target_id!r}) baseline must be a str or a non-empty dict of "
        f"component name -> text, got {type(baseline).__name__}"
    )


def _folder_of(fn: TargetFn) -> Path | None:
    """The folder of the file that defines ``fn`` (relative prompt files are looked up there)."""
    try:
        return Path(inspect.getfile(fn)).resolve().parent
    except (TypeError, OSError):
        return None


def _origin(fn: TargetFn) -> str:
    """Where ``fn`` is defined: the same file imported under two module names is one origin."""
    try:
        where = str(Path(inspect.getfile(fn)).resolve())
    except (TypeError, OSError):
        where = getattr(fn, "__module__", "?")
    return f"{where}:{getattr(fn, '__qualname__', type(fn).__name__)}"


def _resolve_path(fn: TargetFn, value: str | Path) -> str:
    """``value`` made absolute against ``fn``'s file when it names a file there."""
    text = str(value)
    path = Path(text)
    if path.is_absolute() or (":" in text and not text.endswith(".json")):
        return text  # absolute, or a module:function spec
    try:
        base = Path(inspect.getfile(fn)).resolve().parent
    except (TypeError, OSError):
        return text
    candidate = base / path
    return str(candidate) if candidate.exists() else text
