#!/usr/bin/env bash
# The packages a lent accelerator lacks, in a form it can install offline (nothing can be fetched there).
# Its image holds PyTorch, safetensors, tokenizers and the rest, but its own transformers and peft, not
# the versions this project pins (their releases differ in how adapters and position ids load), and no
# gguf, which reads SmolLM2's GGUF weights.
#
#   lab/device_wheels.sh            here: .whl/site.tar.xz (ignored by git), the pinned
#                                   transformers, peft and gguf as installed files, xz-packed
#   lab/device_wheels.sh --install  there, first in every call that carries .whl:
#                                   put them in place of the image's, then this project
#
# Then the accelerator runs the command line itself: `caef-bench train ... --device cuda --processes N`,
# `caef-bench run ... --device cuda`.
#
# Why not the wheels themselves: a call carries the tracked tree and what it names, 64 MiB in all; the
# wheels are 14 MB (zip-compressed file by file), their files packed solid with xz 4 MB.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
pins=$(python3 - <<'PY'
import re
text = open("pyproject.toml").read()
print(" ".join(re.findall(r'"((?:transformers|peft|gguf)==[0-9.]+)"', text.split("[project.optional-dependencies]")[0])))
PY
)
if [ "${1:-}" = --install ]; then
    site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    python3 -m pip uninstall --quiet --yes transformers peft gguf 2>/dev/null || true
    tar xJf .whl/site.tar.xz -C "$site"
    python3 -m pip install --quiet --no-index --no-deps --no-build-isolation -e .
    python3 -c "import transformers, peft, gguf, caef_bench; print('transformers', transformers.__version__, 'peft', peft.__version__, 'gguf ok')"
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    # pure-Python wheels: the same files serve the device's Python (3.12) and this one
    python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$work/wheels" $pins
    python3 -m pip install --quiet --no-deps --no-index --no-compile --target "$work/site" "$work"/wheels/*.whl
    rm -rf "$work/site/bin"  # console scripts: not needed there
    mkdir -p .whl
    rm -f .whl/*.whl
    tar cf - -C "$work/site" . | xz -9 -T2 > .whl/site.tar.xz
    ls -l .whl
fi
