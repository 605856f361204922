#!/usr/bin/env bash
# The GPU call: the kit, gpu_check.py (tests, update, train, bench), then cuda_card.py's decode, graphed and compiled.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpukit/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site XDG_CACHE_HOME=$PWD/.gpukit/xdg
mkdir -p $OUT/check $OUT/card
{ date -u; nvidia-smi; python3 -c "import torch, transformers, trl; print(torch.__version__, transformers.__version__, trl.__version__)"; nproc; uptime; } > $OUT/gpu.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,utilization.gpu,memory.used,power.draw --format=csv -l 1 > $OUT/clocks.csv 2>/dev/null &
t0=$(date +%s)
timeout ${CHECK_S:-400} python3 speedlab/gpu_check.py --out $OUT/check > $OUT/check/log.txt 2>&1; echo "gpu_check rc=$? $(( $(date +%s) - t0 )) s" | tee -a $OUT/gpu.txt
t1=$(date +%s)
left=$(( ${TOTAL_S:-560} - (t1 - t0) ))
[ $left -gt 60 ] && { timeout $left python3 speedlab/cuda_card.py --smollm .gpukit/xdg/turn-rl/smollm2-135m-instruct --out $OUT/card --skip new_lengths train bench > $OUT/card/log.txt 2>&1; echo "cuda_card rc=$? $(( $(date +%s) - t1 )) s" | tee -a $OUT/gpu.txt; }
kill %1 2>/dev/null
tail -30 $OUT/check/log.txt; tail -5 $OUT/card/log.txt
