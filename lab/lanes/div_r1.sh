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
# The DIV composer, from SUB'\''s (a composer'\''s calls and returns); aligner_div runs in aligner_div_r1.sh
$T --stage1-steps 0 --lr 1e-3 --adapter-init checkpoints/smollm2-135m-pending --adapter-init-op sub --seed 17 \
    --executors div --aligners '' --stage2-steps 300 --share structured=0.2,returns=0.3 --out work/smollm2_div_r1 >> $log 2>&1
echo $? > work/$lane.done
