"""The llama.cpp runtime: ``llama-cpp-python[server]`` built from its PyPI source, trimmed.

The source distribution's default build compiles more than the server loads: the multimodal
``mtmd`` library (with a 4 MB audio header) and llama.cpp's ``common`` library (chat parsers,
JSON, an HTTP client). ``python -m llama_cpp.server`` loads only ``libllama`` and the ggml
libraries, so the build leaves the rest out: the libraries it does build are the same machine
code, and every answer is the same (``bench/same_answers.py`` checks it). Progress (stage,
compile steps done, elapsed) goes to a ``Progress`` while pip's whole output goes to a log.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from optimizer.local_models.pip import run_pip
from optimizer.local_models.progress import Progress

__all__ = [
    "LLAMA_CPP_CMAKE_ARGS",
    "LLAMA_CPP_REQUIREMENT",
    "build_settings",
    "ensure_llama_cpp",
    "llama_cpp_installed",
]

LLAMA_CPP_REQUIREMENT = "llama-cpp-python[server]==0.3.36"
# A portable x86 build (SSE4.2, AVX2, FMA, F16C). The default native build (-march=native)
# compiles llama.cpp's AMX kernels on CPUs that have AMX; on a 2-core cloud VM with AMX they
# crashed the server on its first generation (segfault in llama_decode). The build stamp
# records these flags: a copy built without them is rebuilt.
LLAMA_CPP_CMAKE_ARGS = "-DGGML_NATIVE=OFF"
# Left out of the build because the server never loads them (not recorded in the stamp: they
# change what is compiled, not how). LLAVA_BUILD is llama-cpp-python's switch for mtmd.
_TRIM_CMAKE_ARGS = "-DLLAVA_BUILD=OFF"
# llama-cpp-python forces LLAMA_BUILD_COMMON on in its CMakeLists; a normal variable set right
# after llama.cpp's project() shadows that cache entry for llama.cpp's directory (CMP0126).
_SKIP_COMMON = "set(LLAMA_BUILD_COMMON OFF)\n"
# Modules the server imports; missing any of them means the [server] extra is incomplete.
_SERVER_MODULES = (
    "llama_cpp",
    "fastapi",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)
_PART = "runtime"
# pip -v's lines that start a stage of the install, and what the user is told. The build's own
# pip (its build tools) and the build itself print indented lines; only pip's last stage, the
# install of the wheel and the server's packages, is a line of its own at the left margin.
_STAGES = (
    (re.compile(r"^\s*Downloading llama_cpp_python"), "downloading the llama-cpp-python source"),
    (re.compile(r"^\s*Installing build dependencies: started"), "installing its build tools"),
    (re.compile(r"^\s*\*\*\* Configuring CMake"), "configuring llama.cpp (cmake)"),
    (re.compile(r"^\s*\*\*\* Installing project into wheel"), "packing the wheel"),
    (re.compile(r"^Installing collected packages"), "installing it and the server's packages"),
)
_DOWNLOADING = _STAGES[0][1]
_NINJA_STEP = re.compile(r"^\s*\[(\d+)/(\d+)\] ")


def llama_cpp_installed() -> bool:
    """True when llama-cpp-python and its server extra import in this interpreter."""
    return all(importlib.util.find_spec(m) is not None for m in _SERVER_MODULES)


def _build_stamp(python: str | None) -> Path:
    """Where the build flags of the interpreter's llama-cpp-python are recorded (its prefix)."""
    prefix = Path(sys.prefix) if python is None else Path(python).absolute().parent.parent
    return prefix / "gepa-llama-cpp.build"


def build_settings(folder: Path) -> dict[str, str]:
    """The environment pip's build of llama-cpp-python gets; writes its CMake hook in ``folder``.

    ``CMAKE_ARGS`` keeps any flags already in this process's environment and adds the
    portable and the trimmed build's. ``CMAKE_BUILD_PARALLEL_LEVEL`` (unless set) is Ninja's
    own default, two jobs more than cores, for the build tools that have no such default.
    """
    hook = folder / "skip-llama-common.cmake"
    hook.write_text(_SKIP_COMMON)
    cmake = [
        os.environ.get("CMAKE_ARGS", ""),
        LLAMA_CPP_CMAKE_ARGS,
        _TRIM_CMAKE_ARGS,
        f"-DCMAKE_PROJECT_llama.cpp_INCLUDE={hook}",
    ]
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str((os.cpu_count() or 1) + 2)
    return {"CMAKE_ARGS": " ".join(filter(None, cmake)), "CMAKE_BUILD_PARALLEL_LEVEL": jobs}


def _reporter(progress: Progress, fetched: threading.Event) -> Callable[[str], None]:
    """pip's lines to stages and compile steps; ``fetched`` is set past the download."""
    downloading = False

    def on_line(line: str) -> None:
        nonlocal downloading
        if m := _NINJA_STEP.match(line):
            progress.count(_PART, "compiling llama.cpp", int(m.group(1)), int(m.group(2)))
            return
        for pattern, stage in _STAGES:
            if pattern.match(line):
                if downloading and stage != _DOWNLOADING:
                    fetched.set()
                downloading = stage == _DOWNLOADING
                progress.step(_PART, stage)
                return

    return on_line


def ensure_llama_cpp(
    log: Path,
    *,
    python: str | None = None,
    progress: Progress | None = None,
    fetched: threading.Event | None = None,
) -> bool:
    """Install ``llama-cpp-python[server]`` into this interpreter, built portably, if needed.

    Returns True when it had to install. It builds from the PyPI source with the settings of
    ``build_settings`` and without pip's wheel cache (a cached wheel may be a native build);
    a copy installed without the portable flags is rebuilt once. A failed build raises
    ``ModelInstallError`` naming the log. ``python`` (default: this interpreter) is the one
    whose pip runs; ``progress`` shows the stages and the compile steps. ``fetched`` is set
    once the source is downloaded (or nothing is to be), so that other downloads can wait
    for it instead of slowing it.
    """
    fetched = fetched or threading.Event()
    try:
        return _install(log, python, progress or Progress(), fetched)
    finally:
        fetched.set()


def _install(log: Path, python: str | None, progress: Progress, fetched: threading.Event) -> bool:
    build = f"{LLAMA_CPP_REQUIREMENT} CMAKE_ARGS={LLAMA_CPP_CMAKE_ARGS}"
    stamp = _build_stamp(python)
    recorded = stamp.read_text().strip() if stamp.exists() else None
    installed = python is None and llama_cpp_installed()
    if installed and recorded == build:
        return False
    progress.step(_PART, f"installing {LLAMA_CPP_REQUIREMENT} from source (log: {log})")
    # -v: pip passes the build's output on, where the compile steps are counted
    args = ["install", "-v", "--no-cache-dir", "--progress-bar", "off", LLAMA_CPP_REQUIREMENT]
    if installed:  # built with other flags (or by hand): rebuild this one package
        args += ["--force-reinstall", "--no-deps"]
    with tempfile.TemporaryDirectory(prefix="gepa-llama-build-") as tmp:
        run_pip(
            args,
            log,
            f"installing {LLAMA_CPP_REQUIREMENT}",
            python=python or sys.executable,
            env=build_settings(Path(tmp)),
            on_line=_reporter(progress, fetched),
        )
    stamp.write_text(build + "\n")
    importlib.invalidate_caches()
    progress.step(_PART, "installed")
    return True
