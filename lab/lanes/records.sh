#!/usr/bin/env bash
# Records of end-to-end runs still in progress (check.sh), kept across machines: `pack FOLDER...` gzips each
# records folder (work/records/<tier>-<weights>/) into lab/records/<tier>-<weights>/ to commit; `unpack` puts
# every packed folder back under work/records/ where this machine has no such records file, so check.sh
# resumes from them (a rerun skips the problems they hold, and replays the calls the journals of the problems left
# in flight hold: caef_bench/runtime/journal.py) and --reuse-steps can answer from them. From the root:
#   lab/lanes/records.sh pack work/records/smollm2-135m-641305f07473
#   lab/lanes/records.sh unpack
set -euo pipefail
cd "$(dirname "$0")/../.."
case ${1:?usage: lab/lanes/records.sh pack FOLDER... | unpack} in
  pack)
    shift
    for folder in "$@"; do
      out=lab/records/$(basename "$folder") && mkdir -p "$out"
      cp "$folder/weights.json" "$out/"
      rm -f "$out"/*.calls.gz  # a journal is gone once its file's every problem is recorded
      for file in "$folder"/*.jsonl "$folder"/*.calls; do
        [ -s "$file" ] && gzip -9 -n -c "$file" > "$out/$(basename "$file").gz"
      done
      echo "$out: $(ls "$out" | wc -l) files, $(du -sh "$out" | cut -f1)"
    done ;;
  unpack)
    for out in lab/records/*/; do
      folder=work/records/$(basename "$out") && mkdir -p "$folder"
      [ -f "$folder/weights.json" ] || cp "$out/weights.json" "$folder/"
      for packed in "$out"*.jsonl.gz "$out"*.calls.gz; do
        [ -e "$packed" ] || continue
        file=$folder/$(basename "$packed" .gz)
        # a longer file here is this machine's own, further on: keep it
        if [ ! -s "$file" ] || [ "$(wc -l < "$file")" -lt "$(zcat "$packed" | wc -l)" ]; then zcat "$packed" > "$file"; fi
      done
    done ;;
  *) echo "usage: lab/lanes/records.sh pack FOLDER... | unpack" >&2; exit 2 ;;
esac
