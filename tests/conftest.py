"""Session fixtures shared by every test folder.

``local_llm_base_url`` serves the real local student model (Qwen2.5-Coder 0.5B, alias
``student``) with llama-cpp-python on a free port for the whole session. Without the GGUF or
llama-cpp-python the tests that use it are skipped with the install command, unless
``GEPA_REQUIRE_LOCAL_MODEL=1``, which turns the skip into a failure (for CI that must run them).

``postgres_url`` is the real PostgreSQL server of ``GEPA_TEST_POSTGRES_URL`` (see
``tests/postgres.py``; skipped without it unless ``GEPA_REQUIRE_POSTGRES=1``), and
``postgres_store_url`` a fresh schema on it for one test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NoReturn

import pytest

from optimizer.local_models import LlamaServer, ModelInstallError, llama_cpp_installed, model_path
from optimizer.testing import fresh_schema
from tests.postgres import server_url


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("GEPA_REQUIRE_LOCAL_MODEL") == "1":
        pytest.fail(f"GEPA_REQUIRE_LOCAL_MODEL=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def local_llm_base_url() -> Iterator[str]:
    """``http://127.0.0.1:PORT/v1`` of a llama.cpp server; the model name is ``student``."""
    if not llama_cpp_installed():
        _unavailable("llama-cpp-python[server] is not installed: gepa-runtime models install")
    try:
        path = model_path("student")
    except ModelInstallError as exc:
        _unavailable(str(exc))
    with LlamaServer(path, alias="student") as server:
        yield server.base_url


@pytest.fixture(scope="session")
def batching_base_url() -> Iterator[str]:
    """Like ``local_llm_base_url``, from the batching server with 4 slots on the student."""
    if not llama_cpp_installed():
        _unavailable("llama-cpp-python[server] is not installed: gepa-runtime models install")
    try:
        path = model_path("student")
    except ModelInstallError as exc:
        _unavailable(str(exc))
    with LlamaServer(path, alias="student", slots=4) as server:
        yield server.base_url


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The test server's URL (a database the user owns); a skip when there is none."""
    return server_url()


@pytest.fixture
def postgres_store_url(postgres_url: str) -> Iterator[str]:
    """A URL whose store lives in a new, empty schema, dropped after the test."""
    with fresh_schema(postgres_url) as url:
        yield url
