"""The release: ``gepa-runtime --version`` and the installed metadata say pyproject's version."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import version

from tests.fakes.servers import ROOT


def _pyproject_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return str(tomllib.load(file)["project"]["version"])


def test_version_flag_prints_the_version_of_pyproject() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"gepa-runtime {_pyproject_version()}"


def test_the_changelog_has_this_release() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## [{_pyproject_version()}]" in changelog
    assert "## [Unreleased]" in changelog
    assert version("gepa-runtime") == _pyproject_version()
