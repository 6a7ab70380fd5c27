#!/usr/bin/env bash
# Typed problems on SmolLM2 in the tier's float32 (TYPED_DTYPE=bfloat16: see check.sh) with the adapters a
# run would use (assemble.sh: the given round folders, then pending, then the tier's): one line a problem, its
# answer or why none, with solve's exit status (0 right, 1 not). From the repository root:
#   lab/lanes/typed.sh NAME 'EXPR;EXPR;...' [ROUND_FOLDER...]
# e.g. lab/lanes/typed.sh add_r9 '9999999999*12=;1000000+999999=' work/smollm2_add_r9  ->  work/typed_NAME.txt
set -uo pipefail
cd "$(dirname "$0")/../.." && source .venv/bin/activate
export OMP_NUM_THREADS=1
name=${1:?usage: lab/lanes/typed.sh NAME 'EXPR;EXPR;...' [ROUND_FOLDER...]} exprs=${2:?}
shift 2
lab/lanes/assemble.sh "work/try_$name" "$@" > /dev/null
IFS=';' read -ra problems <<< "$exprs"
for expr in "${problems[@]}"; do
  # solve prints the answer (or why none) and the first divergence on stdout, its cost on stderr
  out=$(caef-bench solve --tier smollm2-135m --checkpoints "work/try_$name" --dtype "${TYPED_DTYPE:-float32}" "$expr" 2>&1)
  status=$?
  echo "$expr (exit $status): $(grep -v -e Warning -e warnings.warn <<< "$out" | tail -3 | tr '\n' ' ')"
done | tee "work/typed_$name.txt"
