"""What tests and benches share: real servers on 127.0.0.1 and a scripted reflection model.

Not used by the runtime itself. The test suite (``tests/``) and the benches (``bench/``) both
import it, so a bench never reaches into the test suite's own fakes (``tests/fakes``):

- :mod:`optimizer.testing.servers`: ``free_port``, ``wait_http`` and ``thread_server`` (an
  ASGI app served by uvicorn in a background thread);
- :mod:`optimizer.testing.reflection`: ``reflection_app``, an OpenAI-compatible reflection
  model that answers from the verifier feedback it is shown, deterministically.
"""

from __future__ import annotations

from optimizer.testing.reflection import reflection_app, scripted_answer
from optimizer.testing.servers import free_port, thread_server, wait_http

__all__ = ["free_port", "reflection_app", "scripted_answer", "thread_server", "wait_http"]
