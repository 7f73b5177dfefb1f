"""How hard a rollout is tried: the retry policy, the waits, and when it gives up.

Two budgets, kept apart:

- **Faults** (503 and other retryable statuses, timeouts, dropped connections) spend
  ``--max-retries``; the waits double from ``--retry-base-delay`` with full jitter, or follow
  ``Retry-After`` (capped at ``max_delay_s``).
- **Rate limits** (429) spend none of it: the rollout waits and tries again while the URL has
  answered nothing but 429s for less than ``--rate-limit-wait`` seconds. ``Retry-After`` is
  honoured as given; without it, or past ``max_retries`` 429s in a row, the backoff grows to
  ``max_delay_s``, so a limit that never clears is asked less and less often.

A rollout out of tries is ``RolloutFailed`` with a message that names the fix.
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass

import httpx

from schemas import RolloutFailed

__all__ = ["RetryPolicy", "Tries", "retry_after"]


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: attempts = 1 + ``max_retries``; delays double from ``base_delay_s``."""

    max_retries: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    timeout_s: float = 300.0
    # How long an endpoint may answer nothing but 429s before its rollouts fail.
    rate_limit_wait_s: float = 600.0

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay_s)
        cap = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        return rng.uniform(cap / 2, cap)

    def limited_delay(
        self, streak: int, rng: random.Random, retry_after: float | None, left_s: float
    ) -> float:
        """Seconds to wait after the ``streak``-th 429 in a row, at most ``left_s``.

        ``Retry-After`` is honoured as given (not capped at ``max_delay_s``: a rate limit
        says when it clears); past ``max_retries`` 429s the backoff is the floor, so a
        limit that never clears is asked less and less often even with ``Retry-After: 0``.
        """
        backoff = self.delay(streak, rng, None)
        if retry_after is None:
            wait = backoff
        elif streak > self.max_retries:
            wait = max(retry_after, backoff)
        else:
            wait = max(retry_after, 0.0)
        return min(wait, max(left_s, 0.0))


@dataclass
class Tries:
    """One rollout's requests so far: all of them, the faults, the 429s in a row, the last."""

    seed: str
    attempts: int = 0
    faults: int = 0
    limited: int = 0
    last: str = "no attempt"
    reason: str = "status"
    status: int | None = None

    def wait(
        self,
        policy: RetryPolicy,
        rng: random.Random,
        retry_after: float | None,
        limited_since: float | None,
        url: str,
    ) -> float:
        """Seconds until the next try, or ``RolloutFailed`` when the rollout is out of tries.

        ``limited_since`` is when the URL began answering only 429s (see ``AdaptiveLimit``).
        """
        if self.status == 429:
            self.limited += 1
            waited = 0.0 if limited_since is None else time.monotonic() - limited_since
            left = policy.rate_limit_wait_s - waited
            if left <= 0:
                raise self._rate_limited(policy, url, waited)
            return policy.limited_delay(self.limited, rng, retry_after, left)
        self.limited = 0
        self.faults += 1
        if self.faults > policy.max_retries:
            raise self.failed(policy)
        return policy.delay(self.faults, rng, retry_after)

    def failed(self, policy: RetryPolicy) -> RolloutFailed:
        """The error of a rollout whose faults outlasted ``max_retries``."""
        timeout = policy.timeout_s if self.reason == "timeout" else None
        if timeout is not None:
            message = (
                f"rollout of seed {self.seed!r} timed out: no answer within {timeout:g} s "
                f"({self.attempts} attempts, last: {self.last}); raise --rollout-timeout if "
                "the agent needs longer"
            )
        else:
            message = (
                f"rollout of seed {self.seed!r} failed after {self.attempts} attempts: {self.last}"
            )
        return RolloutFailed(
            message,
            attempts=self.attempts,
            status=self.status,
            reason=self.reason,
            timeout_s=timeout,
            last=self.last,
        )

    def _rate_limited(self, policy: RetryPolicy, url: str, waited: float) -> RolloutFailed:
        return RolloutFailed(
            f"rollout of seed {self.seed!r} gave up on the container's rate limit: {url} has "
            f"answered only 429 for {waited:.0f} s (--rate-limit-wait "
            f"{policy.rate_limit_wait_s:g}; {self.attempts} attempts, last: {self.last}); raise "
            "--rate-limit-wait, or give the container more capacity",
            attempts=self.attempts,
            status=429,
            reason="rate_limit",
            last=self.last,
        )


def retry_after(response: httpx.Response) -> float | None:
    """The answer's ``Retry-After`` in seconds (a number or an HTTP date), or None."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None
