#!/usr/bin/env bash
# The CPU path of issue 62: SmolLM2-135M's add and gt adapters (1-10 digits, the smollm2 preset), in chunks
# of --stop-after that save their checkpoints, one operator at a time so that add's comparison can be made
# end to end first: executor and aligner of add, add's LoRA-direct adapter (on its executor's and aligner's
# samples), then the same for gt. Every chunk is the same `caef-bench train` command, which goes on
# where the last one stopped; rerunning this script goes on too. After each chunk the one-step exact match
# of the latest weights (finished or mid-run) on held-out steps is appended to OUT/progress.log.
#
#   benchmarks/smollm2_cpu_training.sh [OUT] [CHUNK_SECONDS]      (default work/smollm2_cpu 600)
#
# Chunks are short because a SmolLM2 training process's resident memory grows by ~50 MB a step on this
# CPU (measured: 22 GB after ~80 steps, when the OOM killer ended it; malloc_trim, which the loop calls at
# each 200-step checkpoint, returns none of it under jemalloc): a chunk of 600 s is ~50 steps, and each
# new chunk starts from the checkpoint its predecessor saved when it stopped.
#
# One torch thread, nice 5 (the machine is shared), micro-batches of at most 1,024 padded tokens (the same
# gradient, less memory), and the OOM killer told to pick this process first: a chunk it ends loses only
# its own steps.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-work/smollm2_cpu}; chunk=${2:-600}
cli=${CAEF_BENCH_CLI:-.venv/bin/caef-bench}
python=${PYTHON:-.venv/bin/python}
mkdir -p "$out"
export OMP_NUM_THREADS=1 MALLOC_ARENA_MAX=2
train() {  # train ADAPTERS ARGS...: chunks of `caef-bench train ARGS` until one ends unstopped; after each,
    local adapters=$1  # the one-step progress of ADAPTERS (comma-separated; '' for none)
    shift
    local failures=0
    while true; do
        echo "== $(date -u +%FT%TZ) caef-bench train $*" >> "$out/chunks.log"
        (echo 300 > /proc/self/oom_score_adj; exec nice -n 5 "$cli" train --preset smollm2 --base smollm2-135m \
            --out "$out" --micro-batch-tokens 1024 --stop-after "$chunk" --quiet "$@") >> "$out/chunks.log" 2>&1
        code=$?
        [ -z "$adapters" ] || (echo "== $(date -u +%FT%TZ)"; echo 300 > /proc/self/oom_score_adj; exec nice -n 5 \
            "$python" benchmarks/diagnosis/training_progress.py --out "$out" --base smollm2-135m --per-cell 20 \
            --adapters "$adapters") >> "$out/progress.log" 2>&1
        tail -n 3 "$out/chunks.log" | grep -q "^stopped: " || [ $code -ne 0 ] || return 0
        if [ $code -ne 0 ]; then  # killed (the next chunk goes on from the last checkpoint), or an error
            failures=$((failures + 1))
            [ $failures -lt 3 ] || { echo "== three failed chunks in a row: see $out/chunks.log" >> "$out/chunks.log"; exit 1; }
            sleep 60
        else
            failures=0
        fi
    done
}
train executor_add,aligner_add --executors add --aligners add
train '' --executors '' --aligners '' --direct add
train executor_gt,aligner_gt --executors gt --aligners gt
train '' --executors '' --aligners '' --direct gt
