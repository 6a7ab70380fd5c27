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
# aligner_add on runs of one digit in the result (it wrote 9999999999+1=1000000000 from a halt state of 10000000000)
$T --stage1-steps 0 --lr 5e-4 --adapter-init checkpoints/smollm2-135m --seed 23 --executors '' --aligners add \
    --stage2-steps 250 --share structured=0.6,longest=0.2 --out work/smollm2_aligner_add_r5 >> $log 2>&1
echo $? > work/$lane.done
