#!/usr/bin/env bash
# The join's work on SmolLM2 left in two queues, one a core (lab/research/smollm2-log.md, "The join, planned by
# cost"): the end-to-end runs on the pending adapters not yet through (records kept for --reuse-steps), the
# repeated-digit cells of mul and div, the LoRA-direct budgets. From the repository root, one each:
#   setsid nohup lab/lanes/queue.sh A >> work/queue_A.log 2>&1 &
#   setsid nohup lab/lanes/queue.sh B >> work/queue_B.log 2>&1 &
# Queue C is the tiny tier's long-route rounds (lab/lanes/tiny_long.sh), for a core not given to A.
# Each item runs once: a check whose work/check_NAME.done holds 0, or a lane with its work/LANE.done, is
# skipped, and one already running (started by hand) is waited for. On a fresh machine run
# `lab/lanes/records.sh unpack` first: the checks resume from the records committed at a session's end.
set -uo pipefail
cd "$(dirname "$0")/../.."
check() {  # NAME CELLS LIMIT [RECORDS FOLDER whose unchanged adapters' calls answer this run's]
  while pgrep -f "check.sh $1 " > /dev/null; do sleep 60; done
  [ "$(cat "work/check_$1.done" 2>/dev/null)" = 0 ] || CHECK_REUSE=${4:-} nice -n 5 lab/lanes/check.sh "$1" "$2" "$3"
}
train() {  # LANE
  while pgrep -f "train.sh $1\$" > /dev/null; do sleep 60; done
  # a direct budget past 1,000 steps runs in rounds, each a run of train.sh
  until [ -f "work/$1.done" ]; do lab/lanes/train.sh "$1" || break; done
}
direct_eval() {  # OP: a finished budget's last round through lm-eval on its Table 1 cells, N=100, for the take by hand
  [ -f "work/direct_$1_budget.done" ] || return 0
  ! compgen -G "work/direct_$1_budget_eval/*/results_*.json" > /dev/null || return 0
  # the last round's folder is the one begun with the fewest steps left; none when the lane had none to run
  local folder tasks
  folder=$(ls -d "work/smollm2_direct_$1_budget_"* 2> /dev/null | sort -t_ -k5 -n | head -n 1)
  case $1 in mul|div) tasks=caef_$1_1_10_direct ;; *) tasks=caef_$1_5_direct,caef_$1_10_direct ;; esac
  (source .venv/bin/activate && OMP_NUM_THREADS=1 nice -n 5 caef-bench lm-eval --model caef-direct \
     --model_args "tier=smollm2-135m,checkpoints=${folder:-checkpoints/smollm2-135m-pending}" --tasks "$tasks" \
     --limit 100 --batch_size 32 --include_path tasks --device cpu --output_path "work/direct_$1_budget_eval" \
     --log_samples >> "work/direct_$1_budget_eval.log" 2>&1)
}
tiny() {  # LANE of tiny_long.sh
  while pgrep -f "tiny_long.sh $1\$" > /dev/null; do sleep 60; done
  [ -f "work/tiny_$1.done" ] || nice -n 5 lab/lanes/tiny_long.sh "$1"
}
case ${1:?usage: lab/lanes/queue.sh A|B|C} in
  # the join's end-to-end runs on the pending adapters, in the tier's float32 (check.sh): the cells no training
  # still queued can change first; div after executor_div's round 5 is taken (its records answer the calls of the
  # adapters that round leaves alone)
  A) check join_cells add_5,add_10,sub_5,sub_10,gt_5,gt_10,lt_5,lt_10,eq_5,eq_10 100
     check join_div div_1_10 100 work/records/smollm2-135m-d0ec108bbc1e
     check join_rep_div 'repeated_div_10_*' 20 ;;
  # executor_div round 5 first (typed divisions of runs: screened and taken by hand, then the div runs go on with
  # CHECK_REUSE on their records); the budgets count the CAEF rounds taken by then, shortest first
  B) train div_r5
     # the screen before the round is taken by hand: the typed divisions the pending executor_div missed and two
     # it answered (lab/research/smollm2-log.md)
     [ ! -f work/div_r5.done ] || [ -s work/typed_div_r5.txt ] || nice -n 5 lab/lanes/typed.sh div_r5 \
       '9999999999//999999999=;8888888888//999999999=;1000000000//100000000=;7777777777//777777777=;9876543210//987654321=;5555555555//1111111111=' \
       work/smollm2_div_r5
     for op in add div gt sub eq lt; do train "direct_${op}_budget" && direct_eval "$op"; done
     check join_rep_mul 'repeated_mul_10_*' 20
     check join_mul mul_1_10 100
     check join_rep 'repeated_add_10_*,repeated_sub_10_*,repeated_gt_10_*,repeated_lt_10_*,repeated_eq_10_*' 20 ;;
  # the tiny tier's long-route rounds (issue 91), when a core is given to them instead of queue A
  C) for lane in digit_mul_rank64 long_div_r4 aligner_long_mul_r1 aligner_long_div_r1; do tiny "$lane"; done ;;
  *) echo "usage: lab/lanes/queue.sh A|B|C" >&2; exit 2 ;;
esac
