"""Banking77 intent classification as a task container, with any OpenAI-compatible student.

Serve it with ``python -m examples.banking77`` or
``gepa-runtime container examples/banking77/app.py``; build it in-process with
``create_banking77_app``. Data: PolyAI's Banking77 (CC BY 4.0, see ``ATTRIBUTION.md``).
"""

from examples.banking77.agent import (
    Banking77Agent,
    StudentSettings,
    build_messages,
    system_message,
)
from examples.banking77.data import (
    GROUPS,
    Example,
    SampleConfig,
    examples_by_label,
    load_examples,
    load_labels,
    parse_intents,
    prepare_dataset,
    stratified_sample,
)
from examples.banking77.labels import UNKNOWN, normalize_label, parse_label
from examples.banking77.program import (
    BASELINE,
    PROGRAM_ID,
    build_target,
    create_banking77_app,
    target_options,
)
from examples.banking77.verifier import Banking77Verifier

__all__ = [
    "BASELINE",
    "GROUPS",
    "PROGRAM_ID",
    "UNKNOWN",
    "Banking77Agent",
    "Banking77Verifier",
    "Example",
    "SampleConfig",
    "StudentSettings",
    "build_messages",
    "build_target",
    "create_banking77_app",
    "examples_by_label",
    "load_examples",
    "load_labels",
    "normalize_label",
    "parse_intents",
    "parse_label",
    "prepare_dataset",
    "stratified_sample",
    "system_message",
    "target_options",
]
