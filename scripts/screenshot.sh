#!/usr/bin/env bash
# Render one group of a training run's rollouts (tools/show.py) and screenshot it in headless Chromium.
#   bash scripts/screenshot.sh OUT [tools/show.py options, e.g. --step 3 --group 1]
# writes OUT/show_step_N.html and OUT/show_step_N.png. Needs Debian's chromium:
#   apt-get update && apt-get install -y chromium
# Python: $PYTHON if set, else the project's .venv, else python3.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}; [ -x "$py" ] || command -v "$py" >/dev/null || py=python3
[ $# -ge 1 ] || { echo "usage: bash scripts/screenshot.sh OUT [--step N] [--group I]" >&2; exit 2; }
command -v chromium >/dev/null || { echo "chromium not found: apt-get install -y chromium" >&2; exit 1; }
page=$("$py" tools/show.py "$@")
chromium --headless --no-sandbox --disable-gpu --screenshot="${page%.html}.png" \
    --window-size=1200,900 "file://$(realpath "$page")" 2>/dev/null
echo "${page%.html}.png"
