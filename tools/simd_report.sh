#!/usr/bin/env bash
# Loops the code asks to vectorise (`#pragma omp simd`, `omp parallel for simd`) that the
# compiler left scalar: recompiles each C file with the build's own command plus GCC's
# vectoriser report (-fopt-info-vec-all) and prints file:line and the compiler's reason for every
# such loop. A loop that reads through a pointer only under a condition (`if (residual) v +=
# residual[i]`) or calls a function that may set errno stays scalar, silently; one such loop made
# BatchNorm2d's backward a third slower than its memory traffic (docs/kernels.md).
#   tools/simd_report.sh [BUILD_DIR] [C files, default kernels/cpu/*.c]
# Needs a Ninja build made with GCC (clang's reports have another form). Prints nothing when every
# such loop is vectorised.
set -euo pipefail
build=${1:-build}
shift || true
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
[ -f "$build/build.ninja" ] || { echo "simd_report.sh: no Ninja build in $build" >&2; exit 2; }
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(kernels/cpu/*.c)
commands=$(ninja -C "$build" -t commands)
report=$(mktemp)
trap 'rm -f "$report" "$report.o"' EXIT
for f in "${files[@]}"; do
    cmd=$(grep -F -- "-c $here/$f" <<<"$commands" | head -1 || true)
    [ -n "$cmd" ] || { echo "simd_report.sh: $f is not in $build's commands" >&2; continue; }
    # The same flags, the object elsewhere, dependency files off, the report on.
    cmd=$(sed -E 's/ -MD -MT [^ ]+ -MF [^ ]+//; s/ -o [^ ]+ -c / -c /' <<<"$cmd")
    (cd "$build" && eval "$cmd -o $report.o -fopt-info-vec-all" 2>"$report") || { echo "simd_report.sh: $f did not compile" >&2; continue; }
    # The loop's line is the pragma's next one, or, for a loop over more than that line, the
    # next (the compiler names the body's first statement).
    for line in $(awk 'p { print NR; if ($0 !~ /;[ \t]*$/) print NR + 1; p = 0 }
                       /^[ \t]*#pragma omp .*simd/ { p = 1 }' "$f"); do
        at="$here/$f:$line:"
        grep -q -- "^$at[0-9]*: missed: couldn't vectorize loop" "$report" || continue
        grep -q -- "^$at[0-9]*: optimized: loop vectorized" "$report" && continue
        why=$(grep -- "^$at[0-9]*: missed: not vectorized" "$report" | head -1 | sed 's/.*missed: not vectorized: //')
        echo "$f:$line: ${why:-not vectorised}"
    done
done
