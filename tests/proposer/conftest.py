"""Fixtures of the proposer tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import respx

from tests.proposer.fakes import BASE


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    """respx router for the fake endpoint at ``BASE``."""
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router
