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
# executor_sub round 3: b's top 9s (REFLECTION's short results at q1) and the steps that read a callee's halt
$T --stage1-steps 0 --lr 5e-4 --adapter-init checkpoints/smollm2-135m-pending --seed 21 --executors sub --aligners '' \
    --stage2-steps 200 --share nines=0.4,returns=0.4,near=0.1,structured=0.1 --out work/smollm2_sub_r3 >> $log 2>&1
echo $? > work/$lane.done
