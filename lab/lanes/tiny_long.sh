#!/usr/bin/env bash
# One training round of the tiny tier's long-route adapters (docs/long-mul-div.md, lab/research/long-mul-div-log.md),
# one thread, resumable: an unfinished round resumes from its 10-minute checkpoint under its OUT/.runs/. Each round
# goes on from the pending folder's adapter (checkpoints/tiny-pending), or starts one there isn't. From the root:
#   setsid nohup nice -n 5 lab/lanes/tiny_long.sh digit_mul_r2 &   (work/tiny_LANE.log; work/tiny_LANE.done or .failed)
# A finished round is screened by its one-step check (its manifest) before it replaces the pending one.
set -uo pipefail
cd "$(dirname "$0")/../.." && source .venv/bin/activate && mkdir -p work
export OMP_NUM_THREADS=1
lane=${1:?usage: lab/lanes/tiny_long.sh LANE}
pending=checkpoints/tiny-pending
case $lane in
  # round 2: round 1 learned the copies and head moves, not yet the times table (every miss a product digit or
  # carry; its loss still falling when the cosine schedule ended)
  digit_mul_r2) args=(--adapter-init $pending --seed 2 --executors digit_mul --aligners '') ;;
  # round 3: round 2 missed only product digits under a right carry; half its draws take each of DIGIT_MUL's 450
  # (a's digit, the digit, carry) columns alike (--share column_sums, as SmolLM2's executor_add round 10 did ADD's)
  digit_mul_r3) args=(--adapter-init $pending --seed 3 --executors digit_mul --aligners '' --share column_sums=0.5,structured=0.2) ;;
  # a fresh LoRA of rank 64 (the preset's is 16): rounds 2-4 at rank 16 wrote about half the product digits after
  # column 0 wrong under a right carry, the loss still falling; the times table and the read of a's cell are all
  # this adapter learns, and the tiny base was never pre-trained on DIGIT_MUL
  digit_mul_rank64) args=(--seed 5 --executors digit_mul --aligners '' --lora-r 64 --lora-alpha 128
                          --share column_sums=0.5,structured=0.2) ;;
  # round 2 on Horner's layout: round 1 copied the tapes right and missed the names' spelling, b's digit under
  # HEAD2 and a's first cell in DIGIT_MUL's start (0/20 one-step), its loss still falling
  long_mul_r2) args=(--adapter-init $pending --seed 2 --executors long_mul --aligners '') ;;
  # round 3 with LONG_MUL's reads under HEAD2 hinted (models/positions.py): every one-step miss of round 2 was
  # that read (b's digit just before HEAD2, into the command and into DIGIT_MUL's start)
  long_mul_r3) args=(--adapter-init $pending --seed 3 --executors long_mul --aligners '') ;;
  # round 4: round 3 spelt [REM] and [NEG] right; HEAD1 one cell off where a digit comes down is left
  long_div_r4) args=(--adapter-init $pending --seed 4 --executors long_div --aligners '') ;;
  # the aligners' first rounds under coupled-words (a*b= and a//b= to LONG_MUL's and LONG_DIV's start and halt)
  aligner_long_mul_r1) args=(--seed 1 --executors '' --aligners long_mul) ;;
  aligner_long_div_r1) args=(--seed 1 --executors '' --aligners long_div) ;;
  *) echo "no lane $lane (the lanes: lab/lanes/README.md)" >&2; exit 2 ;;
esac
caef-bench train --preset tiny --base checkpoints/tiny/base --eval-per-cell 20 "${args[@]}" --out "work/tiny_$lane" \
    >> "work/tiny_$lane.log" 2>&1
rc=$?; if [ $rc = 0 ]; then echo 0 > "work/tiny_$lane.done"; else echo $rc > "work/tiny_$lane.failed"; fi
