"""Reading the documentation from tests: pages, their code blocks and the reference hook."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from tests.fakes.servers import ROOT

DOCS = ROOT / "docs"
# A fenced block right after this comment is run by tests/docs/test_runnable.py as written.
RUNNABLE = "<!-- runnable -->"


def page(name: str) -> str:
    """The Markdown of ``docs/<name>``."""
    return (DOCS / name).read_text(encoding="utf-8")


def pages() -> list[Path]:
    """Every Markdown page of the site, and the README."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def blocks(text: str, language: str) -> list[str]:
    """The fenced ``language`` blocks of ``text``, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.S | re.M)


def runnable_blocks(path: Path) -> list[tuple[str, str]]:
    """The (language, code) of each block marked runnable in ``path``."""
    found = re.findall(
        rf"^{re.escape(RUNNABLE)}\n```(\w+)\n(.*?)^```",
        path.read_text(encoding="utf-8"),
        re.S | re.M,
    )
    return [(language, code) for language, code in found]


def reference_hook() -> ModuleType:
    """The MkDocs hook that generates the CLI and config reference (``docs/hooks/reference.py``)."""
    spec = importlib.util.spec_from_file_location(
        "docs_reference_hook", DOCS / "hooks" / "reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
