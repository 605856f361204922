#!/usr/bin/env bash
# Screenshot a run's curves in TensorBoard with headless Chromium (as scripts/screenshot.sh does for
# tools/show.py's pages): a train.py run made with --report-to tensorboard.
#   bash scripts/screenshot_tensorboard.sh OUT FILE.png [TAG_FILTER]
# starts TensorBoard on OUT/tensorboard (a free local port), opens its SCALARS page (drawn as SVG, so
# software rendering draws it whole) unsmoothed and filtered to TAG_FILTER (a regular expression;
# default: four training and four evaluation curves of a search run), saves FILE.png and stops
# TensorBoard. Needs requirements-trackers.txt and Debian's chromium. Python: $PYTHON if set, else the
# project's .venv, else python3 (any environment where the requirements are installed).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bash scripts/screenshot_tensorboard.sh OUT FILE.png [TAG_FILTER]" >&2; exit 2; }
py=${PYTHON:-.venv/bin/python}; [ -x "$py" ] || command -v "$py" >/dev/null || py=python3
command -v chromium >/dev/null || { echo "chromium not found: apt-get install -y chromium" >&2; exit 1; }
"$py" -c "import tensorboard" 2>/dev/null || { echo "tensorboard not installed for $py: $py -m pip install -r requirements-trackers.txt -c requirements.txt" >&2; exit 1; }
[ -d "$1/tensorboard" ] || { echo "$1/tensorboard: no such folder; train with --report-to tensorboard --out $1" >&2; exit 1; }
filter=${3:-^(train/(reward|loss|grad_norm|xml_format_rate)|eval/(reward|tool_execution_rate|answer_in_results_rate|exact_match_rate))$}
port=$("$py" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$py" -m tensorboard.main --logdir "$1/tensorboard" --host 127.0.0.1 --port "$port" >/dev/null 2>&1 &
board=$!
profile=$(mktemp -d)  # a fresh browser profile: TensorBoard's saved settings do not carry over
trap 'kill $board 2>/dev/null || true; rm -rf "$profile"' EXIT
"$py" - "$port" <<'PY'  # up to 60 s for it to serve its runs
import sys, time, urllib.request
for _ in range(120):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/data/runs", timeout=1)
        break
    except OSError:
        time.sleep(0.5)
else:
    sys.exit("tensorboard did not start")
PY
query=$("$py" -c "import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))" "$filter")
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile" --window-size=1600,1080 \
    --virtual-time-budget=30000 --screenshot="$2" \
    "http://127.0.0.1:$port/?darkMode=false#scalars&tagFilter=$query&_smoothingWeight=0" 2>/dev/null
echo "$2"
