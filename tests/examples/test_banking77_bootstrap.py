"""run.sh's bootstrap: .venv gets the extras that the job's own flags need."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from examples.banking77.bootstrap import EXTRAS, requirement

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        ([], "."),
        (["--seed", "7"], "."),
        (["--method", "gepa"], "."),
        (["--seed", "7", "--method", "mipro"], ".[mipro]"),
        (["--method=mipro", "--auto", "light"], ".[mipro]"),
        (["--method"], "."),  # malformed: the job's parser reports it, not the bootstrap
    ],
)
def test_requirement_follows_the_flags(argv: list[str], wanted: str) -> None:
    assert requirement(argv) == wanted


def test_every_extra_is_one_of_the_package_and_every_flag_one_of_the_job() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for (flag, value), extra in EXTRAS.items():
        assert extra in extras
        # the job's parser refuses an unknown value and lists the flag's choices
        done = subprocess.run(
            [sys.executable, "-m", "examples.banking77.main_job", flag, "no-such-value"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 2
        assert f"'{value}'" in done.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_run_sh_installs_the_extras_its_flags_need(tmp_path: Path) -> None:
    # run.sh and bootstrap.py in a copy of the tree, over a .venv whose python records what
    # pip and the job were asked (the bootstrap itself runs on this interpreter).
    job = tmp_path / "examples" / "banking77"
    job.mkdir(parents=True)
    for name in ("run.sh", "bootstrap.py"):
        shutil.copy(ROOT / "examples" / "banking77" / name, job / name)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    calls = tmp_path / "calls.txt"
    python.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = examples/banking77/bootstrap.py ]; then exec {sys.executable} "$@"; fi\n'
        f'echo "$*" >> {calls}\n'
    )
    python.chmod(0o755)
    subprocess.run(["bash", str(job / "run.sh"), "--seed", "7", "--method", "mipro"], check=True)
    pip, run = calls.read_text().splitlines()
    assert pip.startswith("-m pip install") and pip.endswith("-e .[mipro]")
    assert run == "-m examples.banking77.main_job --seed 7 --method mipro"
