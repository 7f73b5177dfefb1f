"""Imports only go down the layers; no function in ``optimizer/`` is over 60 lines; no class
of a product package is over 400 lines and no module over 500; no bench imports the test
suite (what benches and tests share lives in ``optimizer.testing``).

The layers (``docs/architecture.md``), lowest first:

    0  schemas                                   contracts: imports none of ours
    1  transport                                 HTTP/1.1, chat clients, provider routing
    2  container, workspace, proposer           may import the above (and each other)
    3  optimizer.runtime.accounts               the budget, the plan, the event sink;
       optimizer.local_models
    4  optimizer.runtime.tracking               the events mirrored into MLflow
    5  optimizer.runtime.rollouts               sending rollouts: client, queue, error gate
    6  optimizer.runtime.search                 what every search is given and shares
    7  optimizer.runtime.results                promotion, statistics, evidence, report
    8  optimizer.runtime.lifecycle              a run created, resumed, executed, guarded
    9  optimizer.runtime (its __init__)
   10  optimizer.gepa, optimizer.mipro          (never each other), optimizer.searches
   11  optimizer (its __init__), optimizer.api, optimizer.checks, optimizer.cli, optimizer.service,
       optimizer.regression, optimizer.sweep, optimizer.testing (what tests and benches share; the product never
       imports it)

Every import statement counts, including those inside functions. A module of ours that no
layer claims fails too, so a new folder has to be placed before it can be imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("schemas", "transport", "container", "workspace", "proposer", "optimizer")
LAYERS: dict[str, int] = {
    "schemas": 0,
    "transport": 1,
    "container": 2,
    "workspace": 2,
    "proposer": 2,
    "optimizer.runtime.accounts": 3,
    "optimizer.local_models": 3,
    "optimizer.runtime.tracking": 4,
    "optimizer.runtime.rollouts": 5,
    "optimizer.runtime.search": 6,
    "optimizer.runtime.results": 7,
    "optimizer.runtime.lifecycle": 8,
    "optimizer.runtime": 9,  # only its __init__, as "optimizer"
    "optimizer.gepa": 10,
    "optimizer.mipro": 10,
    "optimizer.searches": 10,
    "optimizer": 11,  # only its __init__: every other module is claimed by a longer prefix
    "optimizer.api": 11,
    "optimizer.checks": 11,
    "optimizer.cli": 11,
    "optimizer.regression": 11,
    "optimizer.service": 11,
    "optimizer.sweep": 11,
    "optimizer.testing": 11,
}
# Packages whose own prefix claims only their __init__: a module directly in their folder
# belongs to no layer until it is placed.
INIT_ONLY = frozenset({"optimizer", "optimizer.runtime"})
# Searches are strategies side by side: one never builds on another's internals.
SIBLINGS = frozenset({"optimizer.gepa", "optimizer.mipro"})
MAX_FUNCTION_LINES = 60
# Functions allowed over MAX_FUNCTION_LINES, each with why it cannot be split: none.
LONG_FUNCTION_EXEMPTIONS: frozenset[str] = frozenset()
# One concept a room (docs/architecture.md): every class and module of every product package.
MAX_CLASS_LINES = 400
MAX_MODULE_LINES = 500


@dataclass(frozen=True)
class Import:
    """One import statement of one module: what it names and where."""

    module: str  # the importing module, dotted
    path: str  # its file, relative to the repository
    line: int
    target: str  # the imported module, dotted


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> Iterator[Path]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "node_modules" not in path.parts and "typescript" not in path.parts:
                yield path


def absolute_module(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The dotted module an ``ImportFrom`` names, relative imports resolved."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(path: Path, source: str | None = None) -> list[Import]:
    """Every import of ours in one file, at any depth (functions, ``if TYPE_CHECKING``)."""
    module = module_name(path)
    rel = str(path.relative_to(ROOT))
    tree = ast.parse(source if source is not None else path.read_text())
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = absolute_module(module, path.name == "__init__.py", node)
            # ``from optimizer.runtime.lifecycle import run`` names the module
            # optimizer.runtime.lifecycle.run
            targets = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] in PACKAGES:
                found.append(Import(module, rel, node.lineno, target))
    return found


def layer_of(module: str) -> tuple[str, int] | None:
    """The longest layer prefix claiming ``module`` and its layer number."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in LAYERS:
            if prefix in INIT_ONLY and n < len(parts):
                return None  # a module directly in optimizer/ or optimizer/runtime/
            return prefix, LAYERS[prefix]
    return None


def violation(imp: Import) -> str | None:
    """Why ``imp`` breaks the layering, or None."""
    source = layer_of(imp.module)
    if source is None:
        return f"{imp.path}: module {imp.module} belongs to no layer; add it to LAYERS"
    target = layer_of(imp.target) or layer_of(imp.target.rsplit(".", 1)[0])
    if target is None:
        return f"{imp.path}:{imp.line} imports {imp.target}, which belongs to no layer"
    (src_name, src_layer), (dst_name, dst_layer) = source, target
    if dst_layer > src_layer:
        return (
            f"{imp.path}:{imp.line} imports {imp.target}: {src_name} (layer {src_layer}) "
            f"may not import {dst_name} (layer {dst_layer}); move the code down or pass it in"
        )
    if src_name in SIBLINGS and dst_name in SIBLINGS and src_name != dst_name:
        return (
            f"{imp.path}:{imp.line} imports {imp.target}: the searches {src_name} and "
            f"{dst_name} may not import each other; share through optimizer.runtime"
        )
    return None


def test_every_module_of_ours_is_on_a_layer() -> None:
    unplaced = [str(p.relative_to(ROOT)) for p in sources() if layer_of(module_name(p)) is None]
    assert not unplaced, f"modules on no layer (add them to LAYERS): {unplaced}"


def test_imports_only_go_down_the_layers() -> None:
    imports = [imp for path in sources() for imp in imports_of(path)]
    assert len(imports) > 300  # the scan saw the code base, not an empty tree
    problems = [p for p in map(violation, imports) if p is not None]
    assert not problems, "imports that go up the layers:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("module_path", "source", "expected"),
    [
        (
            "optimizer/runtime/lifecycle/run.py",
            "def f():\n    from optimizer.gepa.search import GepaSearch\n",
            "optimizer/runtime/lifecycle/run.py:2 imports optimizer.gepa.search.GepaSearch: "
            "optimizer.runtime.lifecycle (layer 8) may not import optimizer.gepa (layer 10)",
        ),
        (
            "container/app.py",
            "import optimizer.runtime.rollouts.client\n",
            "container (layer 2) may not import optimizer.runtime.rollouts (layer 5)",
        ),
        (
            "schemas/config.py",
            "from workspace import Workspace\n",
            "schemas (layer 0) may not import workspace (layer 2)",
        ),
        (
            "transport/routing.py",
            "from container import optimize\n",
            "transport (layer 1) may not import container (layer 2)",
        ),
        (
            "optimizer/runtime/search/state.py",
            "from ... import searches\n",
            "optimizer.runtime.search (layer 6) may not import optimizer.searches (layer 10)",
        ),
        (
            "optimizer/runtime/rollouts/queue.py",
            "from optimizer.runtime.search.state import SearchState\n",
            "optimizer.runtime.rollouts (layer 5) "
            "may not import optimizer.runtime.search (layer 6)",
        ),
        (
            "optimizer/runtime/search/deps.py",
            "from optimizer.runtime import SearchDeps\n",
            "optimizer.runtime.search (layer 6) may not import optimizer.runtime (layer 9)",
        ),
        (
            "optimizer/runtime/tool.py",
            "import schemas\n",
            "module optimizer.runtime.tool belongs to no layer",
        ),
        (
            "optimizer/mipro/search.py",
            "from optimizer.gepa import gate\n",
            "the searches optimizer.mipro and optimizer.gepa may not import each other",
        ),
        ("optimizer/tool.py", "import schemas\n", "module optimizer.tool belongs to no layer"),
    ],
)
def test_an_upward_import_is_named(module_path: str, source: str, expected: str) -> None:
    problems = [violation(i) for i in imports_of(ROOT / module_path, source)]
    assert any(p is not None and expected in p for p in problems), problems


def test_a_downward_import_passes() -> None:
    source = "from optimizer.runtime.lifecycle.runner import Runner\nimport schemas\n"
    assert [violation(i) for i in imports_of(ROOT / "optimizer/searches.py", source)] == [
        None,
        None,
    ]


def long_functions(path: Path, source: str | None = None) -> list[tuple[str, int]]:
    """``(qualified name, lines)`` of each function over the limit, def line to last line."""
    tree = ast.parse(source if source is not None else path.read_text())
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (child.end_lineno or child.lineno) - child.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found.append((f"{prefix}{child.name}", lines))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return found


def test_no_function_in_optimizer_is_over_60_lines() -> None:
    files = sorted((ROOT / "optimizer").rglob("*.py"))
    assert len(files) > 60
    long = [
        f"{path.relative_to(ROOT)}:{name} has {lines} lines; split it into named steps"
        for path in files
        for name, lines in long_functions(path)
        if f"{path.relative_to(ROOT)}:{name}" not in LONG_FUNCTION_EXEMPTIONS
    ]
    assert not long, "\n".join(long)


def test_a_long_method_is_named() -> None:
    body = "".join(f"        x{i} = {i}\n" for i in range(60))
    source = f"class Run:\n    async def phases(self):\n{body}"
    assert long_functions(ROOT / "optimizer/runtime/lifecycle/run.py", source) == [
        ("Run.phases", 61)
    ]


def long_classes(path: Path, source: str | None = None) -> list[tuple[str, int]]:
    """``(qualified name, lines)`` of each class over ``MAX_CLASS_LINES``, nested ones too."""
    tree = ast.parse(source if source is not None else path.read_text())
    return [
        (node.name, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and (node.end_lineno or node.lineno) - node.lineno + 1 > MAX_CLASS_LINES
    ]


def module_lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_class_is_over_400_lines_and_no_module_over_500() -> None:
    files = list(sources())
    assert {module_name(p).split(".")[0] for p in files} == set(PACKAGES)
    too_long = [
        f"{path.relative_to(ROOT)}:{name} is a class of {lines} lines (cap {MAX_CLASS_LINES}): "
        "split it by concept"
        for path in files
        for name, lines in long_classes(path)
    ] + [
        f"{path.relative_to(ROOT)} has {lines} lines (cap {MAX_MODULE_LINES}): one concept a module"
        for path in files
        if (lines := module_lines(path)) > MAX_MODULE_LINES
    ]
    assert not too_long, "\n".join(too_long)


def test_a_long_class_is_named() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_CLASS_LINES))
    source = f"class Short:\n    y = 1\n\n\nclass Search:\n{body}"
    assert long_classes(ROOT / "optimizer/gepa/search.py", source) == [
        ("Search", MAX_CLASS_LINES + 1)
    ]


def imports_of_tests(path: Path, source: str | None = None) -> list[int]:
    """Lines of ``path`` that import the test suite (``tests``), at any depth."""
    tree = ast.parse(source if source is not None else path.read_text())
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        if any(name == "tests" or name.startswith("tests.") for name in names):
            lines.append(node.lineno)
    return sorted(lines)


def test_no_bench_imports_the_test_suite() -> None:
    files = sorted((ROOT / "bench").rglob("*.py"))
    assert len(files) > 10  # the scan saw the benches
    found = [f"{p.relative_to(ROOT)}:{line}" for p in files for line in imports_of_tests(p)]
    assert not found, (
        "benches that import tests/ (move what they share to optimizer/testing): "
        + ", ".join(found)
    )


def test_an_import_of_the_test_suite_is_found() -> None:
    source = (
        "import os\nimport testsuite\ndef f():\n    from tests.fakes.servers import ROOT\n"
        "import tests.postgres\nfrom tests import postgres\n"
    )
    assert imports_of_tests(ROOT / "bench/scale.py", source) == [4, 5, 6]
