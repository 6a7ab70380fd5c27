#!/usr/bin/env bash
# The packages a lent accelerator lacks, as wheels it can install offline (nothing can be fetched there).
# Its image holds PyTorch, safetensors, tokenizers and the rest, but its own transformers and peft, not
# the versions this project pins (their releases differ in how adapters and position ids load).
#
#   benchmarks/accelerator/device_wheels.sh            here: download them into .whl/ (ignored by git)
#   benchmarks/accelerator/device_wheels.sh --install  there, first in every call that carries .whl:
#                                                      install them and this project, no index, no deps
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
pins=$(python3 - <<'PY'
import re
text = open("pyproject.toml").read()
print(" ".join(re.findall(r'"((?:transformers|peft)==[0-9.]+)"', text.split("[project.optional-dependencies]")[0])))
PY
)
if [ "${1:-}" = --install ]; then
    python3 -m pip install --quiet --no-index --no-deps .whl/*.whl
    python3 -m pip install --quiet --no-index --no-deps --no-build-isolation -e .
    python3 -c "import transformers, peft, caef_bench; print('transformers', transformers.__version__, 'peft', peft.__version__)"
else
    # pure-Python wheels: the same files serve the device's Python (3.12) and this one
    python3 -m pip download --quiet --no-deps --only-binary=:all: -d .whl $pins
    ls .whl
fi
