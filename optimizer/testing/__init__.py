"""What tests and benches share: real servers and processes on 127.0.0.1, the toy program,
a scripted reflection model.

Not used by the runtime itself. The test suite (``tests/``) and the benches (``bench/``) both
import it, so a bench never reaches into the test suite (``tests/``):

- :mod:`optimizer.testing.servers`: ``free_port``, ``wait_http`` and ``thread_server`` (an
  ASGI app served by uvicorn in a background thread);
- :mod:`optimizer.testing.reflection`: ``reflection_app``, an OpenAI-compatible reflection
  model that answers from the verifier feedback it is shown, deterministically, in text, agent
  and rule mode, records what it was asked, and holds its answers when told (``Hold``);
- :mod:`optimizer.testing.toy`: the toy-labels program's files (its SDK container, its
  capacity container, its dataset and splits);
- :mod:`optimizer.testing.processes`: ``toy_container``, the toy container as a real process,
  ``rollout_calls``, what it served, and ``stop_process``;
- :mod:`optimizer.testing.replicas`: capacity-container replicas and HAProxy in front of them,
  and ``run_queue``, many candidates through the real rollout queue;
- :mod:`optimizer.testing.postgres`: ``fresh_schema``, a PostgreSQL schema of its own.
"""

from __future__ import annotations

from optimizer.testing.postgres import fresh_schema
from optimizer.testing.processes import rollout_calls, stop_process, toy_container
from optimizer.testing.reflection import Hold, reflection_app, scripted_answer
from optimizer.testing.replicas import (
    HAPROXY_MISSING,
    KillAt,
    QueueRun,
    Replica,
    haproxy,
    haproxy_binary,
    haproxy_config,
    prompt,
    replicas,
    run_queue,
    wait_until,
)
from optimizer.testing.servers import free_port, thread_server, wait_http
from optimizer.testing.toy import CAPACITY_CONTAINER, TOY, TOY_CONTAINER, TOY_DATA, TOY_SPLITS

__all__ = [
    "CAPACITY_CONTAINER",
    "HAPROXY_MISSING",
    "Hold",
    "TOY",
    "TOY_CONTAINER",
    "TOY_DATA",
    "TOY_SPLITS",
    "KillAt",
    "QueueRun",
    "Replica",
    "free_port",
    "fresh_schema",
    "haproxy",
    "haproxy_binary",
    "haproxy_config",
    "prompt",
    "reflection_app",
    "replicas",
    "rollout_calls",
    "run_queue",
    "scripted_answer",
    "stop_process",
    "thread_server",
    "toy_container",
    "wait_http",
    "wait_until",
]
