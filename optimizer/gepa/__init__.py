"""GEPA: reflective mutations and merges of prompts, gated on minibatches, kept on a frontier.

A :class:`GepaMethod` plugs it into the runtime; the rest are its parts (pure where possible).
"""

from __future__ import annotations

from optimizer.gepa.gate import gate_total, level, passes_gate
from optimizer.gepa.merge3 import merge3, merge_components
from optimizer.gepa.method import GepaMethod
from optimizer.gepa.parents import ancestors, common_ancestor, complementary_pairs, sample_parent
from optimizer.gepa.search import GepaSearch
from optimizer.gepa.showing import evaluations_of
from optimizer.gepa.smoke import smoke_proposal

__all__ = [
    "GepaMethod",
    "GepaSearch",
    "ancestors",
    "common_ancestor",
    "complementary_pairs",
    "evaluations_of",
    "gate_total",
    "level",
    "merge3",
    "merge_components",
    "passes_gate",
    "sample_parent",
    "smoke_proposal",
]
