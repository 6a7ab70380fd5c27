#!/usr/bin/env bash
# A device call carries the tracked tree, 64 MiB in all with the weights' parts and wheels carried beside it.
# SmolLM2's shipped adapters (checkpoints/smollm2-135m/, ~30 MB) leave no room for those, and no call needs
# them (the SmolLM2 call trains its own). Set them aside for a session's device calls and back after:
#   benchmarks/accelerator/lighten_tree.sh aside   untracked here (the index only) and ignored: they do not travel
#   benchmarks/accelerator/lighten_tree.sh back    tracked and in place again: nothing to commit
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
SHIPPED=checkpoints/smollm2-135m
ASIDE=.smollm2-shipped-aside
EXCLUDE=$(git rev-parse --git-path info/exclude)
case "${1:-}" in
    aside)
        [ ! -e "$ASIDE" ] || { echo "lighten_tree: $ASIDE already holds them; run 'back' first" >&2; exit 1; }
        mkdir -p "$(dirname "$EXCLUDE")"
        grep -qxF "/$ASIDE/" "$EXCLUDE" 2>/dev/null || echo "/$ASIDE/" >> "$EXCLUDE"
        git rm -r -q --cached -- "$SHIPPED"
        mv "$SHIPPED" "$ASIDE"
        echo "lighten_tree: $SHIPPED set aside in $ASIDE (untracked, ignored); 'back' restores it" ;;
    back)
        [ -d "$ASIDE" ] || { echo "lighten_tree: nothing set aside ($ASIDE is missing)" >&2; exit 1; }
        mv "$ASIDE" "$SHIPPED"
        git reset -q -- "$SHIPPED"
        echo "lighten_tree: $SHIPPED back and tracked" ;;
    *) echo "usage: $0 aside|back" >&2; exit 2 ;;
esac
