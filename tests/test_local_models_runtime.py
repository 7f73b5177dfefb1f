"""The llama.cpp runtime's install: pip's command, the trimmed build, progress, the stamp."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from optimizer.local_models import ModelInstallError, Progress, ensure_llama_cpp
from optimizer.local_models.runtime import build_settings


def fake_venv_python(tmp_path: Path, script: str) -> Path:
    """An executable ``venv/bin/python`` that runs ``script`` (sh) whatever it is asked."""
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\n{script}\n")
    python.chmod(0o755)
    return python


def test_failed_runtime_build_names_the_log(tmp_path: Path) -> None:
    python = fake_venv_python(tmp_path, "echo 'error: cmake failed to build llama.cpp'\nexit 1")
    log = tmp_path / "logs" / "llama.log"
    with pytest.raises(ModelInstallError, match=r"(?s)pip exit 1.*llama\.log.*cmake failed"):
        ensure_llama_cpp(log, python=str(python), progress=Progress(lambda _: None))
    assert "-m pip install -v --no-cache-dir" in log.read_text()
    assert not (tmp_path / "venv" / "gepa-llama-cpp.build").exists()


def test_runtime_builds_portably_trimmed_without_the_wheel_cache_and_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fake interpreter records what pip was asked, with which build settings.
    monkeypatch.setenv("CMAKE_ARGS", "-DUSER_FLAG=1")
    monkeypatch.delenv("CMAKE_BUILD_PARALLEL_LEVEL", raising=False)
    seen = tmp_path / "seen.txt"
    python = fake_venv_python(
        tmp_path, f'echo "$CMAKE_ARGS|$CMAKE_BUILD_PARALLEL_LEVEL|$*" > {seen}'
    )
    assert ensure_llama_cpp(tmp_path / "llama.log", python=str(python))
    cmake, parallel, args = seen.read_text().strip().split("|")
    flags = cmake.split()
    assert flags[0] == "-DUSER_FLAG=1"  # the user's flags come first: ours win
    assert {"-DGGML_NATIVE=OFF", "-DLLAVA_BUILD=OFF"} <= set(flags)
    assert any(f.startswith("-DCMAKE_PROJECT_llama.cpp_INCLUDE=") for f in flags)
    assert int(parallel) == (os.cpu_count() or 1) + 2  # as Ninja's default, for make too
    assert {"-v", "--no-cache-dir", "llama-cpp-python[server]==0.3.36"} <= set(args.split())
    stamp = (tmp_path / "venv" / "gepa-llama-cpp.build").read_text()
    assert stamp == "llama-cpp-python[server]==0.3.36 CMAKE_ARGS=-DGGML_NATIVE=OFF\n"


def test_runtime_install_shows_its_stages_and_how_far_the_compile_got(tmp_path: Path) -> None:
    # What pip -v prints while it builds llama-cpp-python, cut to the lines that matter.
    pip_output = [
        "Collecting llama-cpp-python==0.3.36",
        "  Downloading llama_cpp_python-0.3.36.tar.gz (76.6 MB)",
        "  Installing build dependencies: started",
        "  Installing collected packages: pathspec, packaging, scikit-build-core",
        "  Installing build dependencies: finished with status 'done'",
        "  *** Configuring CMake...",
        "  -- The C compiler identification is GNU 12.2.0",
        "  [1/4] Building C object ggml.c.o",
        "  [2/4] Building CXX object llama.cpp.o",
        "  [3/4] Linking CXX shared library libllama.so",
        "  [4/4] Install the project...",
        "  *** Installing project into wheel...",
        "Installing collected packages: llama-cpp-python",
        "Successfully installed llama-cpp-python-0.3.36",
    ]
    output = tmp_path / "pip.txt"
    output.write_text("\n".join(pip_output) + "\n")
    python = fake_venv_python(tmp_path, f"cat {output}")
    lines: list[str] = []
    fetched = threading.Event()

    def write(line: str) -> None:  # with whether the models may download yet
        lines.append(f"{line.split(' runtime: ')[1]} {'(fetched)' if fetched.is_set() else ''}")

    progress = Progress(write, every=0)
    ensure_llama_cpp(tmp_path / "llama.log", python=str(python), progress=progress, fetched=fetched)
    assert [line.strip() for line in lines] == [
        f"installing llama-cpp-python[server]==0.3.36 from source (log: {tmp_path}/llama.log)",
        "downloading the llama-cpp-python source",
        "installing its build tools (fetched)",
        "configuring llama.cpp (cmake) (fetched)",
        "compiling llama.cpp 1/4 (fetched)",
        "compiling llama.cpp 2/4 (fetched)",
        "compiling llama.cpp 3/4 (fetched)",
        "compiling llama.cpp 4/4 (fetched)",
        "packing the wheel (fetched)",
        "installing it and the server's packages (fetched)",
        "installed (fetched)",
    ]
    assert "Successfully installed" in (tmp_path / "llama.log").read_text()


def test_progress_counts_at_most_every_few_seconds_but_always_the_last() -> None:
    now = [0.0]
    lines: list[str] = []
    progress = Progress(lines.append, every=10, clock=lambda: now[0])
    for done, t in [(1, 1), (2, 5), (3, 12), (4, 13), (5, 14)]:
        now[0] = t
        progress.count("model", "part", done, 5)
    now[0] = 75
    progress.step("model", "verified")
    assert lines == [
        "[  0:01] model: part 1/5",
        "[  0:12] model: part 3/5",
        "[  0:14] model: part 5/5",
        "[  1:15] model: verified",
    ]


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_the_cmake_hook_turns_off_a_library_the_parent_project_forces_on(
    tmp_path: Path,
) -> None:
    # The shape of llama-cpp-python's CMakeLists around llama.cpp, without compilers.
    top, sub = tmp_path / "src", tmp_path / "src" / "vendor" / "llama.cpp"
    sub.mkdir(parents=True)
    (top / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.21)\n"
        "project(llama_cpp LANGUAGES NONE)\n"
        'set(LLAMA_BUILD_COMMON ON CACHE BOOL "forced by llama-cpp-python" FORCE)\n'
        "add_subdirectory(vendor/llama.cpp)\n"
    )
    (sub / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.14)\n"
        'project("llama.cpp" LANGUAGES NONE)\n'
        'option(LLAMA_BUILD_COMMON "llama: build common utils library" OFF)\n'
        'message(STATUS "common: ${LLAMA_BUILD_COMMON}")\n'
    )
    cmake_args = build_settings(tmp_path)["CMAKE_ARGS"].split()
    done = subprocess.run(
        ["cmake", "-S", str(top), "-B", str(tmp_path / "build"), *cmake_args],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "common: OFF" in done.stdout
