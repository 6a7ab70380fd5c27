#!/usr/bin/env bash
# End to end on SmolLM2 in the tier's float32 with the adapters a run would use (assemble.sh: the given round folders,
# then pending, then the tier's), traced, each problem's record kept (a rerun resumes). From the root:
#   setsid nohup nice -n 5 lab/lanes/check.sh NAME CELLS LIMIT [ROUND_FOLDER...] &
# Table 1's cells run in the caef suite, repeated-digit cells (repeated_*) in the repeated suite (CAEF alone,
# no one-step stress); at most CHECK_IN_FLIGHT problems at once (default 16), so records land steadily; with
# CHECK_REUSE=RECORDS_FOLDER the calls of adapters unchanged since that run are answered from its records.
# e.g. lab/lanes/check.sh mul mul_1_10 10; results in work/check_NAME/, the log in work/check_NAME.log.
set -uo pipefail
cd "$(dirname "$0")/../.." && source .venv/bin/activate
export OMP_NUM_THREADS=1
name=${1:?usage: lab/lanes/check.sh NAME CELLS LIMIT [ROUND_FOLDER...]} cells=${2:?} limit=${3:?}
shift 3
lab/lanes/assemble.sh "work/smollm2_check_$name" "$@" > /dev/null
case $cells in
  repeated_*) suite=(repeated --systems caef-smollm2-135m --onestep-per-cell 0 --work "work/check_${name}_work") ;;
  *) suite=(caef) ;;
esac
# float32, the tier's own dtype, whose records the join reuses: bfloat16 (CHECK_DTYPE=bfloat16, records of its own)
# is ~1.9x faster on a CPU with AVX-512 BF16 and 5-6x slower on one with AVX2 only (SmolLM2's forward on 200 tokens,
# one thread: 1.3 s in float32, 7.2 s in bfloat16; the research log, 2026-12-07)
caef-bench run "${suite[@]}" --tier smollm2-135m --dtype "${CHECK_DTYPE:-float32}" --checkpoints "work/smollm2_check_$name" \
    --cells "$cells" --limit "$limit" --max-in-flight "${CHECK_IN_FLIGHT:-16}" ${CHECK_REUSE:+--reuse-steps "$CHECK_REUSE"} --device cpu --out "work/check_$name" >> "work/check_$name.log" 2>&1
echo $? > "work/check_$name.done"
