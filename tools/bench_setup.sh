# Shared start of the benchmark scripts: `. tools/bench_setup.sh BUILD WORK` sets BUILD (the
# build folder), WORK (a fresh folder, now the working directory), HERE (tools/) and S (the
# spkddp binary), and stops the script at the first failing command.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
WORK=$2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
S=$BUILD/app/spkddp
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK"
