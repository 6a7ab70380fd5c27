#!/usr/bin/env bash
# One call on a lent accelerator (docs/research/structured-operands-log.md, docs/reproducibility.md): the training round,
# then, on the shipped tier with that round's adapters in place (work/candidate), the one-step gates and
# the full-size evaluation side by side, each stopped at its time; what comes back lands in OUT.
#
#   benchmarks/accelerator/device_round.sh OUT [DEVICE] [TRAIN_MIN] [EVAL_S] [SCALE] [INIT] [PLAN]
#
# INIT: the tier whose adapters the round trains further (default checkpoints/tiny, the shipped ones;
# carry another, e.g. round 1's work/candidate_r1, with the call). PLAN: training_round.py --plan.
# FULL_EVALUATION=0 in the environment: the gates alone beside each other, no full-size evaluation
# (a call that trains longer, leaving the evaluation to the next one).
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
mkdir -p work/gates
groups=("gt,lt,eq|" "add,sub|" "reflection,left_mask,mul,div|" "|add,sub,gt,lt,eq,mul,div")
for group in "${groups[@]}"; do
    executors=${group%|*}; aligners=${group#*|}; name=${executors:-aligners}; name=${name//,/_}
    timeout "$eval_seconds" $python -m caef_bench onestep "${gate[@]}" --executors "$executors" --aligners "$aligners" \
        --per-cell "$per_cell" --out "work/gates/onestep_$name" > "work/gates_onestep_$name.log" 2>&1 &
done
timeout "$eval_seconds" $python -m caef_bench onestep "${gate[@]}" --aligners "" --every-step --per-cell "$problems" \
    --out work/gates/every_step > work/gates_every_step.log 2>&1 &
# executor_add on every step of held-out 100-digit runs of one digit and on the top steps of random
# 100-digit sums (long_sum_tops.py): where the one-step gate passed adapters that broke end to end.
# Every step of 25 runs per cell, and the last 15 steps of 200 random problems per cell (the CPU: 1).
tops=(--checkpoints work/candidate --device "$device")
runs=25; random_problems=200; mul_problems=100
[ "$device" = cpu ] && runs=1 && random_problems=1 && mul_problems=1
timeout "$eval_seconds" $python benchmarks/diagnosis/long_sum_tops.py "${tops[@]}" --cells rep_add_100_p1,rep_sub_100_p1 \
    --last 0 --problems "$runs" --json work/gates/long_runs_p1.jsonl > work/gates_long_runs_p1.log 2>&1 &
timeout "$eval_seconds" $python benchmarks/diagnosis/long_sum_tops.py "${tops[@]}" --problems "$random_problems" \
    --json work/gates/long_runs_tops.jsonl > work/gates_long_runs_tops.log 2>&1 &
# and every step of MUL's calls of ADD in held-out mul_1_10 problems (rebuild 2's add broke 4 of 200 there)
timeout "$eval_seconds" $python benchmarks/diagnosis/long_sum_tops.py "${tops[@]}" --cells mul_1_10 --last 0 \
    --problems "$mul_problems" --json work/gates/mul_calls.jsonl > work/gates_mul_calls.log 2>&1 &
if [ "${FULL_EVALUATION:-1}" = 1 ]; then
    timeout "$eval_seconds" $python benchmarks/accelerator/full_evaluation.py --out work/device_eval --device "$device" \
        --checkpoints work/candidate --processes "$processes" --minutes 60 $([ "$device" = cpu ] && echo --smoke) \
        --bring-back "$out" > work/device_eval.log 2>&1
    say "evaluation stopped (exit $?)"
fi
wait
say "gates done"
if [ "${FULL_EVALUATION:-1}" = 1 ]; then
    $python benchmarks/accelerator/full_evaluation.py --out work/device_eval --checkpoints work/candidate --pack-only \
        --bring-back "$out" 2>&1 | tee -a "$out/device.log"
fi
mkdir -p work/gates  # (a gate that never started leaves no folder)
mkdir -p work/device_eval && touch work/device_eval.log
(cd work && tar czf - gates device_eval gates_*.log device_eval.log) > "$out/evaluation.tgz"
say "packed: $(ls "$out" | tr '\n' ' ')"
