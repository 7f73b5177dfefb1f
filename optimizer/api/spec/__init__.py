"""The prompt-optimization spec's call style (``GEPAConfig``, ``Endpoint``, ``score_fn``, flat rows).

One module per concept, all translated onto the keyword style of :mod:`optimizer.api.optimize`:

- :mod:`optimizer.api.spec.call`: ``spec_call`` (the spec's arguments as the keyword ones),
  ``is_spec_call`` and ``evaluate_template``;
- :mod:`optimizer.api.spec.config`: ``Endpoint``, ``GEPAConfig``, ``MIPROConfig`` mapped onto
  one ``RunConfig`` (the spec's numbers as a metric-call budget);
- :mod:`optimizer.api.spec.agent`: the task side (the student on an ``Endpoint``, an
  ``Environment``'s tools, ``score_fn`` as a verifier);
- :mod:`optimizer.api.spec.rows`: flat rows, their label column and ``format_prompt``;
- :mod:`optimizer.api.spec.message`: ``Message``, a chat message read as ``.content`` or
  ``["content"]``.
"""

from __future__ import annotations

from optimizer.api.spec.agent import Environment, EnvironmentFactory, ScoreFn, Trajectory
from optimizer.api.spec.call import evaluate_template, is_spec_call, spec_call
from optimizer.api.spec.config import Endpoint, GEPAConfig, MIPROConfig
from optimizer.api.spec.message import Message
from optimizer.api.spec.rows import Sample, format_prompt

__all__ = [
    "Endpoint",
    "Environment",
    "EnvironmentFactory",
    "GEPAConfig",
    "MIPROConfig",
    "Message",
    "Sample",
    "ScoreFn",
    "Trajectory",
    "evaluate_template",
    "format_prompt",
    "is_spec_call",
    "spec_call",
]
