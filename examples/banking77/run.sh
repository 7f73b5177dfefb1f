#!/usr/bin/env bash
# The README's main job: bootstrap .venv with what the flags need (bootstrap.py: e.g. the [mipro]
# extra for --method mipro), then run the Banking77 GEPA optimization (local models unless
# OPENAI_API_KEY is set). The flags go to examples/banking77/main_job.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
requirement="$(.venv/bin/python examples/banking77/bootstrap.py "$@")"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$requirement"
exec .venv/bin/python -m examples.banking77.main_job "$@"
