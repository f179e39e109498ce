#!/usr/bin/env bash
# apt-install-missing.sh PACKAGE...: installs the Debian packages that are not installed yet
# (as root, or through sudo); does nothing, not even `apt-get update`, when all are there.
set -euo pipefail
missing=()
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
echo "installing: ${missing[*]}"
$SUDO apt-get update -qq
# In containers without an init system, packages' services are not started (invoke-rc.d warns).
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
