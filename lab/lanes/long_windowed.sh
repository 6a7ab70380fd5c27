#!/usr/bin/env bash
# Windowed runs of the tiny tier at OP and LENGTH to N problems, 20 more a run, so that each run's point
# and packed records land in results/ (commit them). A fresh machine resumes from the packed records: they
# are the records less their step texts, which a rerun reads as solved. Usage:
#   setsid nohup nice -n 19 lab/lanes/long_windowed.sh sub 1000 100 &
set -uo pipefail
cd "$(dirname "$0")/../.." && source .venv/bin/activate && mkdir -p work/long_operands/windowed
export OMP_NUM_THREADS=1
op=$1 length=$2 total=$3
records=work/long_operands/windowed/${op}_${length}.jsonl packed=results/records/long_operands/windowed/${op}_${length}.jsonl.gz
log=work/long_${op}_${length}.log
[ -s "$records" ] || { [ -f "$packed" ] && zcat "$packed" > "$records"; }
for ((n = 20; n <= total; n += 20)); do
  python -m caef_bench.evaluate.long_operands --windowed --ops "$op" --lengths "$length" --n $n --max-in-flight 10 \
      --out results/long_operands.json >> "$log" 2>&1 || exit 1
  echo "done n=$n $(date -u)" >> "$log"
done
touch work/long_${op}_${length}.done
