"""``gepa-runtime models install | serve | status``: local models for offline runs.

``install`` builds llama-cpp-python's server into this interpreter if missing while it fetches
the pinned GGUF files (sha256-verified), with a line of progress per stage; ``serve`` runs the student and the reflection model on
127.0.0.1 until Ctrl-C; ``status`` says what is installed and verified.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from optimizer.local_models import (
    LLAMA_CPP_REQUIREMENT,
    MODELS,
    Progress,
    default_models_dir,
    install_models,
    llama_cpp_installed,
    serve_models,
    verified,
)

__all__ = ["add_parser"]

_SIZES = tuple(MODELS)


def _models_dir(args: argparse.Namespace) -> Path:
    return Path(args.dir).expanduser() if args.dir else default_models_dir()


def _install(args: argparse.Namespace) -> int:
    # No selection means "everything the Banking77 example needs": student + 1.5B reflection.
    everything = not args.student and args.reflection is None
    student = args.student or everything
    reflection = "1.5b" if everything else args.reflection
    progress = Progress()
    paths = install_models(
        student=student,
        reflection=reflection,
        models_dir=_models_dir(args),
        runtime=not args.no_runtime,
        progress=progress,
    )
    for role, path in paths.items():
        print(f"{role}: {path} (sha256 verified)")
    print(f"done in {progress.elapsed():.1f}s")
    return 0


def _serve(args: argparse.Namespace) -> int:
    reflection = None if args.reflection == "none" else args.reflection
    served = serve_models(
        student_port=args.student_port,
        reflection_port=args.reflection_port,
        reflection=reflection,
        models_dir=_models_dir(args),
        n_threads=args.threads,
        student_slots=args.student_slots,
    )
    with served:
        print(f"student:    {served.student.base_url}  model=student")
        if served.reflection is not None:
            print(f"reflection: {served.reflection.base_url}  model=reflection")
        print(f"export OPENAI_BASE_URL={served.student.base_url} GEPA_STUDENT_MODEL=student")
        print("serving until Ctrl-C", flush=True)
        while all(s.running for s in served.servers):
            time.sleep(1.0)
        dead = [s for s in served.servers if not s.running]
    for server in dead:
        print(f"error: the {server.alias} server exited; log: {server.log_path}")
    return 1


def _status(args: argparse.Namespace) -> int:
    models_dir = _models_dir(args)
    runtime = "installed" if llama_cpp_installed() else "missing"
    print(f"runtime {LLAMA_CPP_REQUIREMENT}: {runtime}")
    print(f"models dir: {models_dir}")
    for key, spec in MODELS.items():
        path = models_dir / spec.filename
        if verified(path, spec.sha256):
            state = "installed, sha256 verified"
        elif path.exists():
            state = "PRESENT BUT DOES NOT MATCH its pinned sha256 (re-run install)"
        else:
            state = "not installed"
        print(f"{key}: {path.name}: {state}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``models install``, ``models serve`` and ``models status``."""
    models = subparsers.add_parser("models", help="install and serve local GGUF models")
    sub = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    dir_help = "models folder (default: $GEPA_MODELS_DIR or ~/.cache/gepa-runtime/models)"

    inst = sub.add_parser("install", help="install llama-cpp-python and the pinned models")
    inst.add_argument("--student", action="store_true", help="the 0.5B student model")
    inst.add_argument("--reflection", choices=_SIZES, help="the reflection model's size")
    inst.add_argument("--dir", help=dir_help)
    inst.add_argument(
        "--no-runtime", action="store_true", help="skip installing llama-cpp-python[server]"
    )
    inst.set_defaults(func=_install)

    serve = sub.add_parser("serve", help="serve student and reflection models until Ctrl-C")
    serve.add_argument("--student-port", type=int, default=8012)
    serve.add_argument("--reflection-port", type=int, default=8013)
    serve.add_argument("--reflection", choices=(*_SIZES, "none"), default="1.5b")
    serve.add_argument("--threads", type=int, default=2, help="threads per server (default 2)")
    serve.add_argument(
        "--student-slots", type=int, default=1,
        help="student requests decoded together (default 1: llama_cpp.server; above 1: the "
        "batching server, as many as the run's --concurrency)",
    )  # fmt: skip
    serve.add_argument("--dir", help=dir_help)
    serve.set_defaults(func=_serve)

    status = sub.add_parser("status", help="what is installed and verified")
    status.add_argument("--dir", help=dir_help)
    status.set_defaults(func=_status)
