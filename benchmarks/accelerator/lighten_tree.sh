#!/usr/bin/env bash
# A device call carries the tracked tree, 64 MiB in all with the weights' parts and wheels carried beside it.
# SmolLM2's shipped adapters (checkpoints/smollm2-135m/, ~30 MB, and the LoRA-direct row's own folder,
# checkpoints/smollm2-135m-direct/) leave no room for those, and no call needs them (the SmolLM2 call trains
# its own). Set them aside for a session's device calls and back after:
#   benchmarks/accelerator/lighten_tree.sh aside   untracked here (the index only) and ignored: they do not travel
#   benchmarks/accelerator/lighten_tree.sh thin    aside, and THIN below (~52 MB) left in place but untracked and
#                                                  ignored too: SmolLM2's weights then travel in two calls, not
#                                                  six (smollm2_weights.py split); a call that needs one of
#                                                  them carries it by name (the training call: tasks/data)
#   benchmarks/accelerator/lighten_tree.sh back    tracked and in place again, whichever was done: nothing to commit
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
SHIPPED=(checkpoints/smollm2-135m checkpoints/smollm2-135m-direct)  # each kept in ASIDE under its own name
ASIDE=.smollm2-shipped-aside
# in place; only the index and the exclude list change (tests/test_device_plans.py checks that two calls fit)
THIN=(checkpoints/tiny checkpoints/tiny-direct-protocol tasks/data docs/research results/records benchmarks/accelerator/resume)
EXCLUDE=$(git rev-parse --git-path info/exclude)
exclude() { grep -qxF "$1" "$EXCLUDE" 2>/dev/null || echo "$1" >> "$EXCLUDE"; }
case "${1:-}" in
    aside|thin)
        [ ! -e "$ASIDE" ] || { echo "lighten_tree: $ASIDE already holds them; run 'back' first" >&2; exit 1; }
        mkdir -p "$(dirname "$EXCLUDE")"
        exclude "/$ASIDE/"
        mkdir "$ASIDE"
        for path in "${SHIPPED[@]}"; do
            [ -e "$path" ] || continue  # a checkout from before the folder existed
            git rm -r -q --cached --ignore-unmatch -- "$path"
            mv "$path" "$ASIDE/$(basename "$path")"
        done
        echo "lighten_tree: ${SHIPPED[*]} set aside in $ASIDE (untracked, ignored); 'back' restores them"
        if [ "$1" = thin ]; then
            for path in "${THIN[@]}"; do
                exclude "/$path/"
                git rm -r -q --cached --ignore-unmatch -- "$path"
            done
            echo "lighten_tree: ${THIN[*]} untracked and ignored in place (a call that needs them carries them)"
        fi ;;
    back)
        [ -d "$ASIDE" ] || { echo "lighten_tree: nothing set aside ($ASIDE is missing)" >&2; exit 1; }
        for path in "${SHIPPED[@]}"; do
            [ ! -e "$ASIDE/$(basename "$path")" ] || mv "$ASIDE/$(basename "$path")" "$path"
        done
        rmdir "$ASIDE"
        for path in "${THIN[@]}"; do
            grep -vxF "/$path/" "$EXCLUDE" > "$EXCLUDE.tmp" || true
            mv "$EXCLUDE.tmp" "$EXCLUDE"
        done
        git reset -q -- "${SHIPPED[@]}" "${THIN[@]}"
        echo "lighten_tree: ${SHIPPED[*]} back and tracked${THIN:+; ${THIN[*]} tracked}" ;;
    *) echo "usage: $0 aside|thin|back" >&2; exit 2 ;;
esac
