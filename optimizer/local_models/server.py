"""Serve local GGUF models with llama-cpp-python's OpenAI-compatible server.

``LlamaServer`` runs ``python -m llama_cpp.server`` on 127.0.0.1 as a child process, waits
for ``GET /v1/models`` to list its alias, and stops that one pid (terminate, then kill). It is
a sync and an async context manager. ``serve_models`` pairs the student (the 0.5B, alias
``student``) with a reflection model (the 1.5B or the 0.5B, alias ``reflection``) in a second
process, even when both are the same file: each process keeps its own prompt-prefix cache
(llama.cpp reuses the common prefix of consecutive calls, which a shared process would keep
evicting), and two 0.5B processes share the file's pages, so memory stays ~1 GB each at most.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from optimizer.local_models.install import model_path
from schemas import GepaError

PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>

__all__ = ["LlamaServer", "ModelServerError", "ServedModels", "free_port", "serve_models"]


class ModelServerError(GepaError):
    """A local model server did not start or stopped answering."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free right now (bind port 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """Runs in the child before exec: on Linux, get SIGKILL when the parent dies.

    A model server holds a gigabyte and two cores; one orphaned by a killed test run or a
    crashed optimizer would slow everything after it, so it goes down with its parent.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(
            PR_SET_PDEATHSIG, signal.SIGKILL
        )  # no state to save; SIGTERM waits for a generation


# llama.cpp's CPU backend runs its threads under GNU OpenMP, whose idle threads spin (busy-wait)
# for a while before they sleep. Two servers that compute at once on fewer cores than their
# threads then steal each other's cores to spin: each slows down many times over
# (``bench/llama_threads.py``). A passive wait puts idle threads to sleep at once; set
# OMP_WAIT_POLICY in the environment to override it.
QUIET_WAIT = {"OMP_WAIT_POLICY": "PASSIVE"}

# llama_cpp.server settings passed to every server (``--name value``); ``options`` adds more.
# logits_all (the server's default is true) computes the logits of every prompt token over
# Qwen's 151,936-token vocabulary and copies them into a numpy array sized for the whole
# context; nothing here asks for prompt logprobs. Off, the 0.5B needs ~22% less CPU for a new
# system prompt and half the memory (bench/llama_threads.py student, docs/main-job.md).
SERVER_OPTIONS: dict[str, str] = {"logits_all": "false"}


class LlamaServer:
    """``python -m llama_cpp.server`` for one GGUF under one alias, as a child process.

    Use ``with LlamaServer(path) as server:`` or ``async with``; ``base_url`` is the
    OpenAI-compatible ``http://127.0.0.1:PORT/v1``. ``port=None`` picks a free port;
    ``n_threads`` computes generated tokens and ``n_threads_batch`` (default: the same) the
    prompt; ``options`` are more llama_cpp.server settings (``{"n_batch": "1024"}`` becomes
    ``--n_batch 1024``) over ``SERVER_OPTIONS``; ``slots`` above 1 serves the model with
    :mod:`optimizer.local_models.batching` instead, that many requests decoded together (it
    takes no ``options``); ``env`` adds variables to the child's
    environment (a ``None`` value removes one); ``stop_timeout`` is the grace period between
    terminate and kill.
    """

    def __init__(
        self,
        model: Path,
        *,
        alias: str = "student",
        port: int | None = None,
        host: str = "127.0.0.1",
        n_ctx: int = 4096,
        n_threads: int = 2,
        n_threads_batch: int | None = None,
        options: Mapping[str, str] | None = None,
        startup_timeout: float = 120.0,
        log_path: Path | None = None,
        env: Mapping[str, str | None] | None = None,
        stop_timeout: float = 10.0,
        slots: int = 1,
    ) -> None:
        if slots < 1:
            raise ModelServerError(f"slots: give 1 or more, not {slots}")
        if slots > 1 and options:
            raise ModelServerError(
                f"options {sorted(options)}: llama_cpp.server settings; the batching server "
                "(slots > 1) takes none"
            )
        self.model = Path(model)
        self.slots = slots
        self.alias = alias
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.n_threads_batch = n_threads if n_threads_batch is None else n_threads_batch
        self.options = {**SERVER_OPTIONS, **(options or {})}
        self.startup_timeout = startup_timeout
        self.log_path = log_path
        self.env = dict(env or {})
        self.stop_timeout = stop_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._own_log = False

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ending in ``/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The child's pid while it runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        """True while the child process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def spawn(self) -> None:
        """Start the child process without waiting for it to be ready."""
        if self._proc is not None:
            raise ModelServerError(f"server for {self.alias} already started")
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix=f"llama-{self.alias}-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
            self._own_log = True
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server" if self.slots == 1 else "optimizer.local_models.batching",
            "--model",
            str(self.model),
            "--model_alias",
            self.alias,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            "--n_threads_batch",
            str(self.n_threads_batch),
        ]
        if self.slots > 1:
            cmd += ["--slots", str(self.slots)]
        else:
            for name, value in self.options.items():
                cmd += [f"--{name}", value]
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._child_env(),
                # PDEATHSIG follows the spawning *thread*: only tie it to the main thread.
                preexec_fn=_die_with_parent
                if threading.current_thread() is threading.main_thread()
                else None,
            )

    def _child_env(self) -> dict[str, str]:
        """This process's environment, the quiet wait unless it sets one, then ``env``."""
        merged: dict[str, str | None] = {**QUIET_WAIT, **os.environ, **self.env}
        return {name: value for name, value in merged.items() if value is not None}

    def _check_alive(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            code = None if self._proc is None else self._proc.returncode
            log = self.log_path.read_text(errors="replace")[-2000:] if self.log_path else ""
            raise ModelServerError(
                f"the model server for {self.alias} exited (code {code}); log {self.log_path}:\n{log}"
            )

    def _ready(self, response: httpx.Response) -> bool:
        if response.status_code != 200:
            return False
        try:
            models = response.json().get("data", [])
        except (ValueError, AttributeError):
            return False  # something else answers on this port, or a half-started server
        return any(isinstance(m, dict) and m.get("id") == self.alias for m in models)

    def wait_ready(self) -> None:
        """Block until ``GET /v1/models`` lists the alias; raise if the child dies or stalls."""
        deadline = time.monotonic() + self.startup_timeout
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                self._check_alive()
                try:
                    if self._ready(client.get(f"{self.base_url}/models")):
                        return
                except httpx.TransportError:
                    pass  # not listening yet
                time.sleep(0.2)
        self.stop()
        raise ModelServerError(f"{self.alias} not ready after {self.startup_timeout}s")

    async def await_ready(self) -> None:
        """Async ``wait_ready``."""
        deadline = time.monotonic() + self.startup_timeout
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                self._check_alive()
                try:
                    if self._ready(await client.get(f"{self.base_url}/models")):
                        return
                except httpx.TransportError:
                    pass  # not listening yet
                await asyncio.sleep(0.2)
        await asyncio.to_thread(self.stop)
        raise ModelServerError(f"{self.alias} not ready after {self.startup_timeout}s")

    def stop(self) -> None:
        """Terminate this child (and only it), then kill it if it lingers.

        A log file this object created is removed, unless the child had died on its own.
        """
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if self._own_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> LlamaServer:
        self.spawn()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> LlamaServer:
        self.spawn()
        try:
            await self.await_ready()
        except BaseException:
            await asyncio.to_thread(self.stop)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)


@dataclass
class ServedModels:
    """The student server and, optionally, a reflection server, started side by side."""

    student: LlamaServer
    reflection: LlamaServer | None = None

    @property
    def servers(self) -> list[LlamaServer]:
        """Every server, student first."""
        return [s for s in (self.student, self.reflection) if s is not None]

    def __enter__(self) -> ServedModels:
        try:
            for server in self.servers:  # load in parallel, then wait for each
                server.spawn()
            for server in self.servers:
                server.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every server this object started."""
        for server in self.servers:
            server.stop()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> ServedModels:
        return await asyncio.to_thread(self.__enter__)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)


def serve_models(
    *,
    student_port: int | None = 8012,
    reflection_port: int | None = 8013,
    reflection: str | None = "1.5b",
    models_dir: Path | None = None,
    n_threads: int = 2,
    student_slots: int = 1,
) -> ServedModels:
    """Servers for the verified student (alias ``student``) and reflection (``reflection``).

    Enter the result (``with`` / ``async with``) to start them; each is its own process with
    ``n_threads`` threads. llama.cpp threads spin while they wait, so when both servers work
    at once on a 2-core machine each slows down many times over: keep threads x busy servers
    at or below the core count when throughput matters. ``student_slots`` above 1 serves the
    student with the batching server (:mod:`optimizer.local_models.batching`): that many
    requests in one forward pass, for a run that sends that many rollouts at once.
    """
    student = LlamaServer(
        model_path("student", models_dir=models_dir),
        alias="student",
        port=student_port,
        n_threads=n_threads,
        slots=student_slots,
    )
    refl = None
    if reflection is not None:
        refl = LlamaServer(
            model_path("reflection", reflection=reflection, models_dir=models_dir),
            alias="reflection",
            port=reflection_port,
            n_threads=n_threads,
        )
    return ServedModels(student, refl)
