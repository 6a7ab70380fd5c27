#!/usr/bin/env bash
# A folder of links, the adapters a CAEF run will use: each CAEF adapter from the first of the given folders
# that has it, then the pending folder, then the tier's. The LoRA-direct adapters stay out: the weights
# fingerprint, which names a run's records folder, counts every adapter of the folder, and a direct budget
# taken into the pending folder would move CAEF's records and call journals to a new folder. From the root:
#   lab/lanes/assemble.sh work/smollm2_next work/smollm2_div_r1 ...
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: lab/lanes/assemble.sh OUT [FOLDER...]}
shift
rm -rf "$out" && mkdir -p "$out"
for kind in executors aligners; do
  for folder in "$@" checkpoints/smollm2-135m-pending checkpoints/smollm2-135m; do
    for adapter in "$folder/$kind"/*/; do
      [ -f "$adapter/manifest.json" ] || continue
      name=$(basename "$adapter")
      [ -e "$out/$kind/$name" ] || { mkdir -p "$out/$kind"; ln -s "$(realpath "$adapter")" "$out/$kind/$name"; }
    done
  done
done
find "$out" -mindepth 2 -maxdepth 2 -printf '%P -> %l\n' | sort | sed "s#$(pwd)/##"
