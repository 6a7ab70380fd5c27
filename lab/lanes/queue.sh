#!/usr/bin/env bash
# The join's work on SmolLM2 in two queues, one a core (lab/research/smollm2-log.md, "The join, planned by
# cost"): end-to-end runs on the pending adapters with records kept for --reuse-steps, the last CAEF round, the
# repeated-digit cells, the LoRA-direct budgets. From the repository root, one each:
#   setsid nohup lab/lanes/queue.sh A >> work/queue_A.log 2>&1 &
#   setsid nohup lab/lanes/queue.sh B >> work/queue_B.log 2>&1 &
# Queue C is the tiny tier's long-route rounds (lab/lanes/tiny_long.sh), for a core not given to A.
# Each item runs once: a check whose work/check_NAME.done holds 0, or a lane with its work/LANE.done, is
# skipped, and one already running (started by hand) is waited for. On a fresh machine run
# `lab/lanes/records.sh unpack` first: the checks resume from the records committed at a session's end.
set -uo pipefail
cd "$(dirname "$0")/../.."
check() {  # NAME CELLS LIMIT
  while pgrep -f "check.sh $1 " > /dev/null; do sleep 60; done
  [ "$(cat "work/check_$1.done" 2>/dev/null)" = 0 ] || nice -n 5 lab/lanes/check.sh "$1" "$2" "$3"
}
train() {  # LANE
  while pgrep -f "train.sh $1\$" > /dev/null; do sleep 60; done
  [ -f "work/$1.done" ] || lab/lanes/train.sh "$1"
}
tiny() {  # LANE of tiny_long.sh
  while pgrep -f "tiny_long.sh $1\$" > /dev/null; do sleep 60; done
  [ -f "work/tiny_$1.done" ] || nice -n 5 lab/lanes/tiny_long.sh "$1"
}
case ${1:?usage: lab/lanes/queue.sh A|B|C} in
  A) check pending_div div_1_10 100
     train aligner_sub_r3
     check pending_sub sub_5,sub_10 100
     check pending_rep_div 'repeated_div_10_*' 20 ;;
  B) check pending_mul mul_1_10 100
     check pending_cells add_5,add_10,gt_5,gt_10,lt_5,lt_10,eq_5,eq_10 100
     for op in add gt lt eq sub; do check "pending_rep_$op" "repeated_${op}_10_*" 20; done
     # the LoRA-direct budgets count the CAEF rounds taken by then (aligner_sub_r3 is queue A's second item)
     for op in sub lt add gt mul div; do train "direct_${op}_budget"; done
     check pending_rep_mul 'repeated_mul_10_*' 20 ;;
  # the tiny tier's long-route rounds (issue 91), when a core is given to them instead of queue A
  C) for lane in digit_mul_r2 long_mul_r2 long_div_r4 aligner_long_mul_r1 aligner_long_div_r1; do tiny "$lane"; done ;;
  *) echo "usage: lab/lanes/queue.sh A|B|C" >&2; exit 2 ;;
esac
