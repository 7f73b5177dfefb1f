"""A person steering a run as it goes: pause, resume, reject, pin, unpin, note, stop.

Each action is an ``action`` event of the run's log (:class:`schemas.Action`), recorded by the
service, the console or the CLI, and read by the process executing the run:

- :mod:`optimizer.runtime.steering.state`: ``Steering``, the actions folded (``fold_actions``);
- :mod:`optimizer.runtime.steering.validate`: whether an action fits the run
  (``parse_action``, ``check_action``);
- :mod:`optimizer.runtime.steering.record`: ``record_action`` and ``read_steering``;
- :mod:`optimizer.runtime.steering.live`: ``RunSteering``, what the executing run reads.
"""

from __future__ import annotations

from optimizer.runtime.steering.live import POLL_S, RunSteering, SteeringListener
from optimizer.runtime.steering.record import ACTION, action_events, read_steering, record_action
from optimizer.runtime.steering.state import Note, Steering, StopRequest, fold_actions
from optimizer.runtime.steering.validate import SEARCH_OVER, check_action, parse_action

__all__ = [
    "ACTION",
    "POLL_S",
    "SEARCH_OVER",
    "Note",
    "RunSteering",
    "Steering",
    "SteeringListener",
    "StopRequest",
    "action_events",
    "check_action",
    "fold_actions",
    "parse_action",
    "read_steering",
    "record_action",
]
