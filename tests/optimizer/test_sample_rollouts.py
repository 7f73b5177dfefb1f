"""The dry-run's sample rollouts against a rate-limited container: a short wait, then a warning.

httpx.MockTransport, no sockets.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import httpx

from optimizer.checks.sample_rollouts import (
    CHECK_RATE_LIMIT_WAIT_S,
    SampleOutcome,
    findings_of,
    sample_rollouts,
)
from schemas import Program, RunConfig

PROGRAM = Program.model_validate(
    {
        "program_id": "p",
        "fingerprint": "fp-1",
        "components": [{"name": "system_prompt", "text": "x"}],
        "seeds": {"train": ["row-1", "row-2", "row-3", "row-4"], "holdout": ["h"]},
    }
)


async def _limited(config: RunConfig) -> tuple[list[SampleOutcome], Counter[str], float]:
    calls: Counter[str] = Counter()

    def handler(request: httpx.Request) -> httpx.Response:
        calls[json.loads(request.content)["seed"]] += 1
        return httpx.Response(
            429, headers={"Retry-After": "0.05"}, json={"error": "Retryable", "message": "slow"}
        )

    loop = asyncio.get_running_loop()
    started = loop.time()
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        outcomes = await sample_rollouts(
            "http://c1", PROGRAM, config, http=http, token=None, count=2
        )
    return outcomes, calls, loop.time() - started


async def test_a_rate_limit_is_waited_on_briefly_then_reported_as_a_warning() -> None:
    outcomes, calls, took = await _limited(RunConfig(rate_limit_wait_s=0.4))
    assert [o.verdict for o in outcomes] == ["rate_limited", "rate_limited"]
    assert set(calls) == {"row-1", "row-3"} and all(n > 1 for n in calls.values())
    assert 0.4 <= took < CHECK_RATE_LIMIT_WAIT_S  # the shorter --rate-limit-wait bounds it
    (finding,) = findings_of(outcomes)
    assert finding.warning and finding.ok
    assert finding.message.startswith(
        "the container answered only 429 for the check's 0.4 s wait (last: HTTP 429: "
    )
    assert finding.message.endswith("(also seeds row-3)")
    assert "--rate-limit-wait" in finding.fix


def test_the_check_never_waits_longer_than_its_own_cap() -> None:
    # The run's default (600 s) is capped: the check gives up after CHECK_RATE_LIMIT_WAIT_S.
    outcomes, _, took = asyncio.run(_limited(RunConfig()))
    assert [o.verdict for o in outcomes] == ["rate_limited", "rate_limited"]
    assert CHECK_RATE_LIMIT_WAIT_S <= took < 600
    assert f"the check's {CHECK_RATE_LIMIT_WAIT_S:g} s wait" in outcomes[0].problem
