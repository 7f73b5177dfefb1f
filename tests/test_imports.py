"""What the optimizer process imports: not the ``openai`` package, whose type models cost
about half a second of CPU, unless a route needs it (Azure, LiteLLM, a student client)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from optimizer.cli.main import build_parser
build_parser()  # every command group, as `gepa-runtime --help` loads them
import optimizer
from optimizer.api import run_gepa
from proposer import ModelClient, ProposerConfig
ModelClient(ProposerConfig(model="m", base_url="http://127.0.0.1:9/v1"))
from container import ChatTarget, create_app
print(sorted(m for m in sys.modules if m == "openai" or m.startswith("openai.")))
"""


def test_the_optimizer_and_its_reflection_client_do_not_import_openai() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout[:500]


SERVERS = """
import sys
from optimizer.cli.main import build_parser
build_parser("optimize")  # what `gepa-runtime optimize run ...` loads before it runs
print(sorted(m for m in ("uvicorn", "starlette", "container.app", "optimizer.service.app",
                         "optimizer.api") if m in sys.modules))
"""


def test_optimize_loads_no_server_and_no_python_api() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SERVERS], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout[:500]
