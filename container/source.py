"""The source text of user code: what the program fingerprint and a verifier's spec hash.

An edited file shows in a long-lived process (the line cache is checked first); code with no
source file (a notebook cell gone, a compiled function) falls back to its bytecode, and a
callable object to its class.
"""

from __future__ import annotations

import inspect
import linecache
from typing import Any

__all__ = ["source_of"]


def source_of(obj: Any) -> str:
    """The source text of a function, class or module; its bytecode when there is no source."""
    if not (
        inspect.isfunction(obj)
        or inspect.ismethod(obj)
        or inspect.isclass(obj)
        or inspect.ismodule(obj)
    ):
        obj = type(obj)  # a callable object: its class holds the code (a repr holds an address)
    try:
        filename = inspect.getsourcefile(obj)
        if filename:
            linecache.checkcache(filename)  # pick up an edited file in a long-lived process
        return inspect.getsource(obj)
    except (OSError, TypeError):
        code = getattr(obj, "__code__", None)
        if code is not None:
            return code.co_code.hex() + repr(code.co_consts)
        return repr(obj)
