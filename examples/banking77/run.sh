#!/usr/bin/env bash
# The README's main job: bootstrap .venv, then run the Banking77 GEPA optimization
# (local models unless OPENAI_API_KEY is set). Extra flags go to examples/banking77/main_job.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e .
exec .venv/bin/python -m examples.banking77.main_job "$@"
