#!/usr/bin/env bash
# The house's floors, enforced. Usage: check_layers.sh [REPO]; prints each offence, exits 1 if any.
#
# 1. Floors. Every #include "..." of a source file of app/, io/ or kernels/ points at its own
#    folder or at a floor below it, never above and never sideways. Floors, top to bottom:
#      app/main.c -> app/cli -> app/prepare | app/train -> app/eval -> app/dist -> app/model -> io -> kernels
#    app/prepare and app/train are siblings (neither includes the other). Inside app/model:
#      the top (model.h, registry, exports) -> one folder per family (linear/, ecapa/, ...; no
#      family includes another) -> layers/ -> core/
#    and a model sees of io only the loader's plain batch.h and the export formats. io's wings:
#      export -> ckpt -> dataset -> audio -> common;  scores -> dataset;
#      loader -> augment -> dataset -> audio -> common;  loader -> video -> common
#    (ckpt, scores and loader are siblings; each wing names the wings it may include below).
#    kernels: cpu/ and cuda/ (which never see each other) -> the op contracts kernels/*.h ->
#    kernels/base, the base everything stands on; nothing outside kernels/ includes cpu/ or
#    cuda/. A file in a folder that is no floor here is an offence too.
# 2. One header per file. A .c file of app/, io/ or kernels/base defines only what its own
#    header (the same path with .h) declares, so that calling a function means including the
#    header of the file that defines it. The one table of many implementations is
#    app/cli/commands.h (one cmd_*.c per command), and X_none.c implements X.h in a build without
#    X's libraries (io/audio/audio_none.c: no audio decoding); kernels/*.h are contracts that the
#    backends (and kernels/device_none.c, the answers of a build without CUDA) implement by design.
# 3. No circles. Files (a .c or .cu with its header) may not reach themselves again through
#    includes and calls (a call: a file names a non-static function that another defines).
#    So a file that dispatches is never also the helper that its implementations call back
#    into: that helper goes below both.
set -uo pipefail
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$repo" || exit 2

# The public face of kernels (the op contracts in kernels/ itself, and the base).
K="kernels/@ kernels/base/"

# io's wings, each with the wings below it that it may include besides itself.
IO_WINGS="
export:  ckpt dataset common
scores:  dataset common
ckpt:    dataset common
loader:  augment dataset video audio common
augment: dataset audio common
dataset: audio common
video:   common
audio:   common
common:
"

# io_wing_prefixes WING: io/WING/ and the prefixes of the wings below it; "-": no such wing.
io_wing_prefixes() {
    local row
    row=$(printf '%s\n' "$IO_WINGS" | grep "^$1:") || { echo "-"; return; }
    for w in $1 ${row#*:}; do printf 'io/%s/ ' "$w"; done
}

# allowed_prefixes FILE: the include prefixes FILE may use (space separated); "-": no floor.
allowed_prefixes() {
    case "$1" in
        app/main.c)         echo "app/ io/ $K" ;;
        app/cli/*)          echo "app/ io/ $K" ;;
        app/prepare/*)      echo "app/prepare/ app/dist/ io/ $K" ;;
        app/train/*)        echo "app/train/ app/eval/ app/dist/ app/model/ io/ $K" ;;
        app/eval/*)         echo "app/eval/ app/dist/ app/model/ io/ $K" ;;
        app/dist/*)         echo "app/dist/ app/model/ io/ $K" ;;
        app/model/core/*)   echo "app/model/core/ io/loader/batch.h $K" ;;
        app/model/layers/*) echo "app/model/layers/ app/model/core/ io/loader/batch.h io/export/ $K" ;;
        app/model/*/*)      echo "$(dirname "$1")/ app/model/layers/ app/model/core/ io/loader/batch.h io/export/ $K" ;;
        app/model/*)        echo "app/model/ io/loader/batch.h io/export/ $K" ;;
        io/*/*)             w=${1#io/} && w=$(io_wing_prefixes "${w%%/*}") && [ "$w" != "-" ] && echo "$w $K" || echo "-" ;;
        kernels/base/*)     echo "kernels/base/" ;;
        kernels/cpu/*)      echo "kernels/cpu/ $K" ;;
        kernels/cuda/*)     echo "kernels/cuda/ $K" ;;
        kernels/*/*)        echo "-" ;;
        kernels/*)          echo "$K" ;;
        *)                  echo "-" ;;
    esac
}

files=$(find app io kernels \( -name "*.c" -o -name "*.h" -o -name "*.cu" -o -name "*.cuh" \) | sort)
bad=0

# ---- 1. floors ----------------------------------------------------------------------------------
# Every file's include lines, "FILE<tab>LINE<tab>INCLUDED", read once for both checks that need them.
# shellcheck disable=SC2086
includes=$(grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' $files |
    sed -E 's/^([^:]+):([0-9]+):.*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1\t\2\t\3/')
floors=$(for f in $files; do printf '%s\t' "$f" && allowed_prefixes "$f"; done)
awk -F'\t' -v me="$0" '
    NR == FNR {
        allowed[$1] = $2
        if ($2 == "-") { print $1 ": stands in a folder that is no floor of " me " (give it a floor there, or move it)"; bad = 1 }
        next
    }
    allowed[$1] != "-" {
        n = split(allowed[$1], p, " "); ok = 0
        for (i = 1; i <= n && !ok; i++)
            if (p[i] == "kernels/@") ok = $3 ~ /^kernels\/[A-Za-z0-9_]+\.h$/  # an op contract shared by cpu/ and cuda/
            else ok = index($3, p[i]) == 1
        if (!ok) { print $1 ":" $2 ": includes \"" $3 "\", which is above or beside its floor"; bad = 1 }
    }
    END { exit bad }
' <(printf '%s\n' "$floors") <(printf '%s\n' "$includes") || bad=1

# ---- what each file defines, declares, calls and includes --------------------------------------
# One line per fact: "FILE def NAME" (a function defined with external linkage), "FILE sdef
# NAME" (a static or inline one, or one in an anonymous namespace), "FILE decl NAME" (a function
# declared at file scope), "FILE call NAME" (in a function body, a name followed by "(", not
# after "." or "->"). Comments, strings and preprocessor lines are left out; extern "C" and namespace
# blocks do not count as nesting.
facts=$(mktemp)
trap 'rm -f "$facts"' EXIT
# shellcheck disable=SC2086
awk '
function flush_stmt(   s, name, pre) {
    s = stmt; stmt = ""
    gsub(/[[:space:]]+/, " ", s); sub(/^ /, "", s)
    if (s == "" || s ~ /^(typedef|struct|union|enum|_Static_assert|static_assert)([ (]|$)/) return
    if (s !~ /\(/) return
    pre = s; sub(/\(.*/, "", pre)
    if (pre ~ /[=\[]/) return                      # an initialised variable, an array
    if (!match(pre, /[A-Za-z_][A-Za-z0-9_]* *$/)) return
    name = substr(pre, RSTART, RLENGTH); sub(/ +$/, "", name)
    if (name ~ /^(if|for|while|switch|return|sizeof|__attribute__|__typeof__|defined)$/) return
    if (substr(s, length(pre) + 2, 1) == "*") return   # a function pointer
    if (kind == "{") {
        internal = (" " pre " ") ~ / (static|inline) /
        for (a = 1; a <= open_free; a++) if (anon[a]) internal = 1
        print FILENAME, internal ? "sdef" : "def", name
    } else if ((" " pre " ") !~ / static /) {
        print FILENAME, "decl", name
    }
}
FNR == 1 { depth = 0; incomment = 0; stmt = ""; cont = 0; open_free = 0 }
{
    line = $0
    if (cont) { cont = (line ~ /\\$/); next }                     # a macro continued
    if (!incomment && line ~ /^[[:space:]]*#/) { cont = (line ~ /\\$/); next }
    out = ""
    while (length(line) > 0) {
        if (incomment) {
            i = index(line, "*/"); if (!i) { line = ""; break }
            line = substr(line, i + 2); incomment = 0; continue
        }
        c = substr(line, 1, 1); two = substr(line, 1, 2)
        if (two == "//") break
        if (two == "/*") { incomment = 1; line = substr(line, 3); continue }
        if (c == "\"" || c == "\x27") {                          # a string or a character
            q = c; j = 2
            while (j <= length(line) && substr(line, j, 1) != q) j += (substr(line, j, 1) == "\\") ? 2 : 1
            out = out q q; line = substr(line, j + 1); continue
        }
        out = out c; line = substr(line, 2)
    }
    # file-scope statements, and the calls inside function bodies
    n = length(out)
    for (k = 1; k <= n; k++) {
        ch = substr(out, k, 1)
        if (depth > 0 && ch ~ /[A-Za-z_]/ && (k == 1 || substr(out, k - 1, 1) !~ /[A-Za-z0-9_.>]/)) {
            rest = substr(out, k)
            if (match(rest, /^[A-Za-z_][A-Za-z0-9_]*[[:space:]]*\(/)) {
                tok = substr(rest, 1, RLENGTH); sub(/[[:space:]]*\($/, "", tok)
                print FILENAME, "call", tok
            }
            match(rest, /^[A-Za-z_][A-Za-z0-9_]*/); k += RLENGTH - 1; continue
        }
        if (depth == 0) {
            if (ch == "{") {
                if (stmt ~ /(extern *""|namespace[A-Za-z0-9_ ]*) *$/) {
                    anon[++open_free] = (stmt ~ /namespace *$/); stmt = ""; continue
                }
                kind = "{"; flush_stmt(); depth = 1; continue
            }
            if (ch == "}" && open_free > 0) { open_free--; stmt = ""; continue }
            if (ch == ";") { kind = ";"; flush_stmt(); continue }
            stmt = stmt ch
        } else {
            if (ch == "{") depth++
            else if (ch == "}") { depth--; if (depth == 0) stmt = "" }
        }
    }
    if (depth == 0) stmt = stmt " "
}
' $files | sed -E 's/extern "" //' | sort -u > "$facts"

# ---- 2. one header per file ---------------------------------------------------------------------
# own_header FILE: the header whose declarations FILE may define.
while read -r f name hdrs; do
    own=${f%.c}.h
    ok=1
    for h in ${hdrs//,/ }; do
        [ "$h" = "$own" ] && continue
        [[ "$f" == app/cli/cmd_*.c && "$h" == app/cli/commands.h ]] && continue
        # X_none.c is X.c's stand-in in a build without X's libraries (io/audio/audio_none.c).
        [[ "$f" == *_none.c && "$h" == "${f%_none.c}.h" ]] && continue
        ok=0
        echo "$f: defines $name, which $h declares (a file implements its own header only: $own)"
    done
    [ $ok -eq 0 ] && bad=1
done < <(awk '
    $2 == "decl" && $1 ~ /\.(h|cuh)$/ { d[$3] = d[$3] ? d[$3] "," $1 : $1 }
    $2 == "def" && $1 ~ /^(app|io|kernels\/base)\/.*\.c$/ { defs[++n] = $1 " " $3 }
    END { for (i = 1; i <= n; i++) { split(defs[i], p, " "); if (p[2] in d) print p[1], p[2], d[p[2]] } }
' "$facts")

# ---- 3. no circles ------------------------------------------------------------------------------
# Edges between files, a file being its path without the extension: includes (of the tree's own
# headers) and calls (of a function that another file defines), each with what it takes.
edges=$(
    # the tree's own headers among the included files
    present=$(printf '%s\n' "$includes" | cut -f3 | sort -u | while read -r inc; do [ -f "$inc" ] && echo "$inc"; done)
    awk -F'\t' 'NR == FNR { here[$1] = 1; next }
        $3 in here { f = $1; sub(/\.[a-z]+$/, "", f); t = $3; sub(/\.[a-z]+$/, "", t); print f, t, "includes " $3 }
    ' <(printf '%s\n' "$present") <(printf '%s\n' "$includes")
    awk '
        $2 == "decl" && $1 ~ /\.(h|cuh)$/ { public[$3] = 1 }
        $2 == "def" { m = $1; sub(/\.[a-z]+$/, "", m); if (!(($3, m) in seen)) { seen[$3, m] = 1; owner[$3] = owner[$3] " " m } }
        $2 == "def" || $2 == "sdef" { local[$1, $3] = 1 }
        $2 == "call" { calls[++n] = $1 " " $3 }
        END {
            for (i = 1; i <= n; i++) {
                split(calls[i], p, " ")
                if (!(p[2] in public) || ((p[1], p[2]) in local)) continue
                from = p[1]; sub(/\.[a-z]+$/, "", from)
                k = split(owner[p[2]], to, " ")
                for (j = 1; j <= k; j++) if (to[j] != from) print from, to[j], "calls " p[2]
            }
        }
    ' "$facts"
)
circles=$(printf '%s\n' "$edges" | awk '
    # Tarjan: the strongly connected components of the file graph; each of more than one file
    # is a circle, printed with the ties inside it.
    NF >= 3 && $1 != $2 {
        key = $1 SUBSEP $2
        if (!(key in why)) { adj[$1] = adj[$1] " " $2; why[key] = $3 " " $4 } else if (index(why[key], $4) == 0 && length(why[key]) < 200) why[key] = why[key] ", " $4
        node[$1]; node[$2]
    }
    function visit(v,   list, k, i, w) {
        idx[v] = low[v] = ++counter; stack[++sp] = v; onstack[v] = 1
        k = split(adj[v], list, " ")
        for (i = 1; i <= k; i++) {
            w = list[i]
            if (!(w in idx)) { visit(w); if (low[w] < low[v]) low[v] = low[w] }
            else if (onstack[w] && idx[w] < low[v]) low[v] = idx[w]
        }
        if (low[v] == idx[v]) {
            comp = ""; size = 0
            do { w = stack[sp--]; onstack[w] = 0; comp = comp " " w; size++ } while (w != v)
            if (size > 1) report(comp)
        }
    }
    function report(comp,   m, k, i, j, key) {
        k = split(comp, m, " ")
        printf "circle of %d files:", k
        for (i = 1; i <= k; i++) printf " %s", m[i]
        printf "\n"
        for (i = 1; i <= k; i++) for (j = 1; j <= k; j++) {
            key = m[i] SUBSEP m[j]
            if (key in why) printf "  %s -> %s: %s\n", m[i], m[j], why[key]
        }
    }
    END { for (v in node) if (!(v in idx)) visit(v) }
')
if [ -n "$circles" ]; then
    echo "$circles"
    bad=1
fi

if [ $bad -eq 0 ]; then echo "layering: every include points down, every file implements its own header, no circles"; fi
exit $bad
