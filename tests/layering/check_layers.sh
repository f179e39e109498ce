#!/usr/bin/env bash
# The dependency direction, enforced: every #include "..." of a source file must point at its
# own folder or one below it. Layers, top to bottom:
#   app/main.c -> app/cli -> app/train -> app/eval -> app/dist -> app/model -> io -> kernels
# and inside kernels: cpu/, cuda/ -> kernels/*.h -> kernels/base (cpu/ and cuda/ never see
# each other). Usage: check_layers.sh [REPO]; prints each offending line, exits 1 if any.
set -uo pipefail
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$repo" || exit 2

# allowed_prefixes FILE: the include prefixes FILE may use (space separated).
allowed_prefixes() {
    case "$1" in
        app/main.c)      echo "app/ io/ kernels/" ;;
        app/cli/*)       echo "app/ io/ kernels/" ;;
        app/train/*)     echo "app/train/ app/eval/ app/dist/ app/model/ io/ kernels/" ;;
        app/eval/*)      echo "app/eval/ app/dist/ app/model/ io/ kernels/" ;;
        app/dist/*)      echo "app/dist/ app/model/ io/ kernels/" ;;
        app/model/*)     echo "app/model/ io/ kernels/" ;;
        io/*)            echo "io/ kernels/" ;;
        kernels/base/*)  echo "kernels/base/" ;;
        kernels/cpu/*)   echo "kernels/cpu/ kernels/base/ kernels/@" ;;
        kernels/cuda/*)  echo "kernels/cuda/ kernels/base/ kernels/@" ;;
        kernels/*)       echo "kernels/base/ kernels/@" ;;
        *)               echo "" ;;
    esac
}

bad=0
while IFS= read -r f; do
    allowed=$(allowed_prefixes "$f")
    [ -z "$allowed" ] && continue
    while IFS=: read -r line inc; do
        ok=0
        for p in $allowed; do
            if [ "$p" = "kernels/@" ]; then
                # a header directly in kernels/ (the op contracts shared by cpu/ and cuda/)
                [[ "$inc" =~ ^kernels/[A-Za-z0-9_]+\.h$ ]] && ok=1
            elif [[ "$inc" == "$p"* ]]; then
                ok=1
            fi
        done
        if [ $ok -eq 0 ]; then
            echo "$f:$line: includes \"$inc\", which is above or beside its layer"
            bad=1
        fi
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | sed -E 's/^([0-9]+):.*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1:\2/')
done < <(find app io kernels \( -name "*.c" -o -name "*.h" -o -name "*.cu" -o -name "*.cuh" \) | sort)
if [ $bad -eq 0 ]; then echo "layering: every include points down"; fi
exit $bad
