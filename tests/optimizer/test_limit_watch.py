"""What a run is told about its endpoints' limits: ``concurrency`` events and rate-limit notices."""

from __future__ import annotations

from typing import Any

from optimizer.runtime.rollouts.limit_watch import LimitWatch


def _view(limit: int = 8, limited: float | None = None, url: str = "http://c") -> dict[str, Any]:
    return {
        "url": url,
        "limit": limit,
        "max": 32,
        "in_flight": 3,
        "cuts": 2,
        "adaptive": True,
        "rate_limited_s": limited,
        "retry_after_s": 5.0 if limited is not None else None,
    }


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, kind: str, data: dict[str, Any]) -> None:
        self.events.append((kind, data))


async def _looks(views: list[list[dict[str, Any]]], concurrency: int = 32) -> Recorder:
    recorder, queue = Recorder(), list(views)
    watch = LimitWatch(lambda: queue[0], recorder, concurrency=concurrency, wait_s=600.0)
    while queue:
        await watch.look()
        queue.pop(0)
    return recorder


async def test_a_concurrency_event_when_a_limit_changes_and_only_then() -> None:
    recorder = await _looks([[_view(32)], [_view(32)], [_view(25)], [_view(25)], [_view(20)]])
    limits = [data["limit"] for kind, data in recorder.events if kind == "concurrency"]
    assert limits == [32, 25, 20]
    kind, data = recorder.events[-1]
    assert data["max"] == 32 and data["endpoints"][0]["cuts"] == 2


async def test_the_runs_limit_sums_its_urls_up_to_its_own_concurrency() -> None:
    recorder = await _looks([[_view(3, url="http://a"), _view(2, url="http://b")]], concurrency=4)
    (_, data), *_ = recorder.events
    assert (data["limit"], data["max"]) == (4, 4)


async def test_a_long_rate_limit_is_announced_with_how_long_and_how_much_longer() -> None:
    waits = [1.0, 4.0, 6.0, 12.0, 31.0, 45.0, 61.0, 100.0, 125.0, None]
    recorder = await _looks([[_view(1, limited=w)] for w in waits])
    notices = [d["message"] for kind, d in recorder.events if kind == "warning"]
    assert len(notices) == 5  # at 5 s, 30 s, 60 s, 120 s, and when it cleared
    assert notices[0].startswith(
        "waiting on the container's rate limit: http://c has answered only 429 for 6 s"
    )
    assert "Retry-After 5 s" in notices[0] and "slowed to 1 at a time" in notices[0]
    assert "up to 600 s (--rate-limit-wait), 594 s more" in notices[0]
    assert "for 31 s" in notices[1] and "for 61 s" in notices[2] and "for 125 s" in notices[3]
    assert notices[4].startswith("the container's rate limit at http://c cleared")


async def test_a_short_rate_limit_is_not_announced() -> None:
    recorder = await _looks([[_view(4, limited=w)] for w in (0.5, 2.0, None)])
    assert [kind for kind, _ in recorder.events if kind == "warning"] == []
