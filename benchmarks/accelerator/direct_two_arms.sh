#!/usr/bin/env bash
# Issue 61 on a lent accelerator: LoRA-direct add and sub on the protocol's draws from nothing, two arms side
# by side: the preset's rank 16 (lr 1e-3) and rank 256 (alpha 512, lr 2e-4: the capacity check's arm that left
# the plateau soonest), snapshots at every 1/16 to 3/8 of the budget then 1/2 ... 1. A second call with the
# same folders goes on from the runs' checkpoints (the machine keeps work/ while it is warm).
#   benchmarks/accelerator/direct_two_arms.sh DEVICE TRAIN_MINUTES EVAL_MINUTES OUT [direct_adapters flags]
#   PATH=$PWD/.venv/bin:$PATH benchmarks/accelerator/direct_two_arms.sh cpu 0.5 0.5 work/two_arms_smoke --smoke
#                                                       # the CPU try (python3 must be the project's)
# Under OUT (at most 8 files of 16 MiB come back from a call): r16.tgz.part_* (the rank-16 run whole: its
# curve.tgz and resume.tgz, evaluation, report, logs; `cat r16.tgz.part_* | tar xz`), r256.tgz (the rank-256
# run's evaluation, report and logs) and r256_<op>.tgz (its last snapshot of each operator: its snapshots
# are ~20 times the size of rank 16's, and its checkpoints, with their optimizer state, do not come back).
# Run on 2026-11-30 as `cuda 7.0 1.4`, then `cuda 3.5 1.2` on the warm machine (docs/lora-direct.md).
set -uo pipefail
device=$1 train_minutes=$2 eval_minutes=$3 out=$4
shift 4
fractions=1/16,1/8,3/16,1/4,5/16,3/8,1/2,5/8,3/4,1
workers=3
[ "$device" = cpu ] && workers=0
mkdir -p "$out"
arm() {  # arm NAME [train-curve flags]
    local name=$1
    shift
    python3 benchmarks/accelerator/direct_adapters.py --out "work/h200_$name" --device "$device" --ops add,sub \
        --minutes "$train_minutes" --eval-minutes "$eval_minutes" "${extra[@]}" \
        -- --fractions "$fractions" --workers "$workers" "$@" > "$out/$name.log" 2>&1
    echo "$name: exit $?" >> "$out/$name.log"
}
extra=("$@")
arm r16 &
arm r256 --lora-r 256 --lora-alpha 512 --lr 2e-4 &
wait
cp "$out/r16.log" work/h200_r16/ && tar czf - --exclude h200_r16/curve -C work h200_r16 \
    | split -b 15000000 - "$out/r16.tgz.part_"  # with every snapshot it passed 16 MiB
cp "$out/r256.log" work/h200_r256/ && tar czf "$out/r256.tgz" --exclude h200_r256/curve \
    --exclude h200_r256/curve.tgz --exclude h200_r256/resume.tgz -C work h200_r256
for op in add sub; do  # the snapshot furthest into the budget
    last=$(python3 -c "import json, pathlib, sys
found = [(json.loads(m.read_text())['curve']['fraction_of_budget'], m.parent)
         for m in pathlib.Path('work/h200_r256/curve').glob('frac_*/direct/$op/manifest.json')]
print(max(found)[1].relative_to('work/h200_r256/curve') if found else '')")
    [ -n "$last" ] && tar czf "$out/r256_$op.tgz" -C work/h200_r256/curve "$last"
done
rm -f "$out"/r16.log "$out"/r256.log
ls -l "$out"
