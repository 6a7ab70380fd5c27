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
# aligner_div, from aligner_sub (the same expressions but for the symbol), into the same folder as executor_div
$T --stage1-steps 0 --lr 1e-3 --adapter-init checkpoints/smollm2-135m-pending --adapter-init-op sub --seed 17 \
    --executors '' --aligners div --stage2-steps 300 --share structured=0.2 --out work/smollm2_div_r1 >> $log 2>&1
echo $? > work/$lane.done
