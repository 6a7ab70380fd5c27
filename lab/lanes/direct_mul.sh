#!/usr/bin/env bash
# A lane of the research log (lab/research/smollm2-log.md): one thread, resumable (a finished adapter is
# skipped, an unfinished one resumes from its 10-minute checkpoint under OUT/.runs/). Start from the root:
#   setsid nohup nice -n 5 lab/lanes/NAME.sh &
set -uo pipefail
cd "$(dirname "$0")/../.." && source .venv/bin/activate && mkdir -p work
export OMP_NUM_THREADS=1
T="caef-bench train --preset smollm2 --base smollm2-135m --eval-per-cell 50"
lane=$(basename "$0" .sh)
log=work/$lane.log
# LoRA-direct mul from direct_add, with the samples CAEF's MUL lineage adds to add's: executor_sub 2,400 + 1,600,
# aligner_sub 2,000, executor_mul 2,400, aligner_mul 2,400 = 10,800 (1,350 steps of 8), 33,760 in all as its CAEF pair
$T --executors '' --aligners '' --direct mul --stage1-steps 0 --adapter-init checkpoints/smollm2-135m \
    --adapter-init-op add --seed 24 --stage2-steps 1350 --lr 1e-3 --out work/smollm2_direct_mul >> $log 2>&1
echo $? > work/$lane.done
