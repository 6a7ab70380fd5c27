#!/usr/bin/env bash
# One call on a lent accelerator (docs/structured-operands.md, docs/reproducibility.md): the training round,
# then, on the shipped tier with that round's adapters in place (work/candidate), the one-step gates and
# the full-size evaluation side by side, each stopped at its time; what comes back lands in OUT.
#
#   benchmarks/accelerator/device_round.sh OUT [DEVICE] [TRAIN_MIN] [EVAL_S] [SCALE] [INIT] [PLAN]
#
# INIT: the tier whose adapters the round trains further (default checkpoints/tiny, the shipped ones;
# carry another, e.g. round 1's work/candidate_r1, with the call). PLAN: training_round.py --plan.
#
# On the CPU, to try every step of it before spending device time:
#   benchmarks/accelerator/device_round.sh work/device_smoke cpu 1 120 0.01
set -u
out=${1:?OUT folder}; device=${2:-cuda}; train_minutes=${3:-4.5}; eval_seconds=${4:-200}; scale=${5:-1}
init=${6:-checkpoints/tiny}; plan=${7:-round2}
python=${PYTHON:-python3}
mkdir -p "$out" work
started=$SECONDS
say() { echo "[$((SECONDS - started)) s] $*" | tee -a "$out/device.log"; }
say "device round on $device: training ${train_minutes} min from $init, evaluation ${eval_seconds} s, scale $scale"
batch=128
[ "$device" = cpu ] && batch=8  # (six streams of 128 fill a 24 GB machine's memory)
$python benchmarks/accelerator/training_round.py --out "$out" --device "$device" --minutes "$train_minutes" \
    --scale "$scale" --batch "$batch" --adapter-init "$init" --plan "$plan" --candidate work/candidate 2>&1 | tee -a "$out/device.log"
say "training round done"
gate=(--checkpoints work/candidate --structured --device "$device")
per_cell=1000; problems=20; processes=8
[ "$device" = cpu ] && per_cell=4 && problems=1 && processes=2
# The gates: one-step at $per_cell cases per cell on random and structured cells, in four processes
# (the executors in three groups, the aligners) so that each adapter is reached within the call; every
# step of $problems problems per cell for each executor (a 100-digit run needs ~99.99% per step).
groups=("gt,lt,eq|" "add,sub|" "reflection,left_mask,mul,div|" "|add,sub,gt,lt,eq,mul,div")
for group in "${groups[@]}"; do
    executors=${group%|*}; aligners=${group#*|}; name=${executors:-aligners}; name=${name//,/_}
    timeout "$eval_seconds" $python -m caef_bench onestep "${gate[@]}" --executors "$executors" --aligners "$aligners" \
        --per-cell "$per_cell" --out "work/gates/onestep_$name" > "work/gates_onestep_$name.log" 2>&1 &
done
timeout "$eval_seconds" $python -m caef_bench onestep "${gate[@]}" --aligners "" --every-step --per-cell "$problems" \
    --out work/gates/every_step > work/gates_every_step.log 2>&1 &
timeout "$eval_seconds" $python benchmarks/accelerator/full_evaluation.py --out work/device_eval --device "$device" \
    --checkpoints work/candidate --processes "$processes" --minutes 60 $([ "$device" = cpu ] && echo --smoke) \
    --bring-back "$out" > work/device_eval.log 2>&1
say "evaluation stopped (exit $?)"
wait
$python benchmarks/accelerator/full_evaluation.py --out work/device_eval --checkpoints work/candidate --pack-only \
    --bring-back "$out" 2>&1 | tee -a "$out/device.log"
mkdir -p work/gates  # (a gate that never started leaves no folder)
(cd work && tar czf - gates device_eval gates_*.log device_eval.log) > "$out/evaluation.tgz"
say "packed: $(ls "$out" | tr '\n' ' ')"
