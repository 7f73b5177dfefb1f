"""Import user code: ``MODULE[:TARGET]`` for targets, ``module:function`` for verifiers.

``MODULE`` is a dotted module name (importable from the current directory) or a path to a
``.py`` file (its folder is put on ``sys.path`` so it can import its neighbours). The
optimizer uses ``load_target`` to serve a container in-process.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from container.target import Target, default_registry
from schemas import UserError

__all__ = ["import_attribute", "import_module", "load_target", "split_spec"]


def split_spec(spec: str) -> tuple[str, str | None]:
    """``"pkg.mod:name"`` -> ``("pkg.mod", "name")``; the name part is optional."""
    module, sep, name = spec.rpartition(":")
    if not sep or not name or "/" in name or "\\" in name:
        return spec, None
    return module, name


def import_module(module: str) -> ModuleType:
    """Import a dotted module or a ``.py`` file; ``UserError`` with the reason if it fails."""
    if not module:
        raise UserError("empty module name; use MODULE[:TARGET] with a dotted module or a .py path")
    if module.endswith(".py") or "/" in module or os.sep in module:
        return _import_file(Path(module))
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)  # the console script does not put the current folder there
    try:
        return importlib.import_module(module)
    except Exception as exc:  # user code: any import-time failure is a configuration error
        raise UserError(f"cannot import module {module!r}: {type(exc).__name__}: {exc}") from exc


def import_attribute(spec: str) -> Any:
    """The object named by ``module:attribute`` (the attribute may be dotted)."""
    module_name, name = split_spec(spec)
    if name is None:
        raise UserError(f"{spec!r} is not a module:attribute spec")
    value: Any = import_module(module_name)
    for part in name.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise UserError(f"{module_name!r} has no attribute {name!r}") from None
    return value


def load_target(spec: str) -> Target:
    """The ``Target`` named by ``MODULE[:TARGET]``.

    ``TARGET`` is a target id or the name of a decorated function in the module; it may be
    left out when the module registers exactly one target.
    """
    module_name, name = split_spec(spec)
    module = import_module(module_name)
    targets = _targets_of(module)
    if name is not None:
        attr = getattr(module, name, None)
        found = getattr(attr, "__gepa_target__", None) or targets.get(name)
        if isinstance(found, Target):
            return found
        known = ", ".join(sorted(targets)) or "none"
        raise UserError(
            f"module {module_name!r} has no optimization target {name!r}; found: {known}"
        )
    if len(targets) == 1:
        return next(iter(targets.values()))
    if not targets:
        raise UserError(
            f"module {module_name!r} registers no optimization target; decorate a function "
            "with @optimize(id=..., baseline=...)"
        )
    raise UserError(
        f"module {module_name!r} registers {len(targets)} targets ({', '.join(sorted(targets))}); "
        f"pick one with {module_name}:TARGET"
    )


def _targets_of(module: ModuleType) -> dict[str, Target]:
    """Targets defined by ``module``: in the registry, or on its decorated functions."""
    found = {t.id: t for t in default_registry.list() if t.module == module.__name__}
    for value in vars(module).values():
        target = getattr(value, "__gepa_target__", None)
        if isinstance(target, Target) and target.module == module.__name__:
            found.setdefault(target.id, target)
    return found


def _import_file(path: Path) -> ModuleType:
    path = path.expanduser().resolve()
    if not path.is_file():
        raise UserError(f"no such Python file: {path}")
    for loaded in list(sys.modules.values()):  # already imported, maybe as a.b.agent
        file = getattr(loaded, "__file__", None)
        if file and Path(file).resolve() == path:
            return loaded
    name = path.stem if path.stem.isidentifier() else "gepa_target"
    if name in sys.modules:
        name = f"{name}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"cannot import {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # user code: any import-time failure is a configuration error
        del sys.modules[name]
        raise UserError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    return module
