"""No import cycle in any product package: every import at any depth counts.

The graph has an edge for every import statement of ours, wherever it stands (module level,
inside a function, under ``if TYPE_CHECKING:``):

- ``import a.b.c`` -> the module ``a.b.c``;
- ``from a.b import c`` -> the module ``a.b`` (its ``__init__`` runs and is read first), and
  ``a.b.c`` too when ``c`` is a submodule; ``from a.b import name`` -> ``a.b`` alone.

No edge goes implicitly from a module to its parent packages: every package re-exports its
modules from its ``__init__``, so that edge would close a cycle around every package. A
strongly connected component of more than one module is a cycle, and fails, unless it is one
of ``KNOWN_CYCLES``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping

import pytest

from tests.test_layers import PACKAGES, absolute_module, module_name, sources

# Cycles allowed for now, each with who removes it; an entry that is no longer a cycle fails.
KNOWN_CYCLES: dict[frozenset[str], str] = {}


def _named(node: ast.AST, module: str, is_package: bool) -> Iterator[tuple[str, bool]]:
    """``(dotted name, exact)`` of what one statement imports; ``exact`` names a module for
    sure, else it may be a submodule or a name defined in the module before it."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, True
    elif isinstance(node, ast.ImportFrom):
        base = absolute_module(module, is_package, node)
        yield base, True
        for alias in node.names:
            yield f"{base}.{alias.name}", False


def edges_of(module: str, is_package: bool, source: str, modules: Mapping[str, object]) -> set[str]:
    """The modules of ours that ``module`` imports (see the module docstring)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        for name, exact in _named(node, module, is_package):
            if name.split(".")[0] not in PACKAGES:
                continue
            if name in modules:
                found.add(name)
            elif exact:
                raise AssertionError(f"{module} imports {name}, which is no module of ours")
    found.discard(module)
    return found


def import_graph(files: Mapping[str, tuple[bool, str]]) -> dict[str, set[str]]:
    """Module -> the modules it imports, from ``{module: (is_package, source)}``."""
    return {m: edges_of(m, is_pkg, text, files) for m, (is_pkg, text) in files.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def _product() -> dict[str, tuple[bool, str]]:
    files: dict[str, tuple[bool, str]] = {}
    for path in sources():
        files[module_name(path)] = (path.name == "__init__.py", path.read_text())
    return files


def test_no_product_package_has_an_import_cycle() -> None:
    files = _product()
    assert {m.split(".")[0] for m in files} == set(PACKAGES)  # every package was read
    graph = import_graph(files)
    assert sum(len(e) for e in graph.values()) > 500  # the scan saw the imports
    found = cycles(graph)
    unknown = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    stale = [sorted(c) for c in KNOWN_CYCLES if c not in found]
    assert not unknown, "import cycles (move the shared part down, or pass it in):\n" + "\n".join(
        " <-> ".join(c) for c in unknown
    )
    assert not stale, f"KNOWN_CYCLES lists cycles that are gone (drop them): {stale}"


def _graph(**modules: str) -> dict[str, set[str]]:
    """A graph of made-up modules: ``pkg__init__`` is the package ``pkg``'s ``__init__``."""
    files = {}
    for name, text in modules.items():
        dotted = name.replace("__init__", "").replace("__", ".").strip(".")
        files[dotted] = (name.endswith("__init__"), text)
    return import_graph(files)


@pytest.mark.parametrize(
    "modules",
    [
        # a package's __init__ re-exports a module that imports a sibling through the package
        {
            "workspace__init__": "from workspace.store import W",
            "workspace__store": "from workspace import runs",
            "workspace__runs": "",
        },
        # only for type checking
        {
            "schemas__a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from schemas.b import B",
            "schemas__b": "from schemas.a import A",
        },
        # inside a function
        {
            "container__a": "def f():\n    import container.b",
            "container__b": "from container.a import x",
        },
        # a name read from the package's __init__
        {"proposer__init__": "from proposer.a import A", "proposer__a": "from proposer import B"},
    ],
)
def test_a_cycle_is_found(modules: dict[str, str]) -> None:
    (cycle,) = cycles(_graph(**modules))
    assert len(cycle) == 2


def test_a_module_does_not_import_its_parent_package_implicitly() -> None:
    graph = _graph(
        optimizer__init__="from optimizer.runtime import Runner",
        optimizer__runtime__init__="from optimizer.runtime.runner import Runner",
        optimizer__runtime__runner="import optimizer.runtime.state\nfrom optimizer.runtime.state import S",
        optimizer__runtime__state="",
    )
    assert graph["optimizer.runtime.runner"] == {"optimizer.runtime.state"}
    assert cycles(graph) == []


def test_an_import_of_no_module_of_ours_is_named() -> None:
    with pytest.raises(AssertionError, match="schemas.gone"):
        _graph(schemas__a="import schemas.gone")
