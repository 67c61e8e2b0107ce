#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Builds a tiny system image for task environments from the host's own
# files, so that the tests need no network: a few programs with the
# libraries ldd names, in a merged-/usr layout, and an os-release of its own.
#   tiny-image.sh DIR [PROGRAM...]
set -euo pipefail
dir=$1; shift
progs=("$@")
[ ${#progs[@]} -gt 0 ] || progs=(sh cat ls id env true false echo test grep)

rm -rf "$dir"
mkdir -p "$dir"/usr/bin "$dir"/usr/lib "$dir"/etc "$dir"/usr/lib/x86_64-linux-gnu "$dir"/usr/lib64
ln -s usr/bin "$dir"/bin
ln -s usr/lib "$dir"/lib
ln -s usr/lib64 "$dir"/lib64
for p in "${progs[@]}"; do
        src=$(command -v "$p" || true)
        [ -n "$src" ] && [ -f "$src" ] || continue
        cp -L "$src" "$dir/usr/bin/$p"
        ldd "$src" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
                real=${lib#/usr}
                mkdir -p "$dir/usr$(dirname "$real")"
                cp -L "$lib" "$dir/usr$real"
        done
done
cat > "$dir"/usr/lib/os-release <<OS
PRETTY_NAME="agentfab tiny test image"
NAME="agentfab-tiny"
ID=agentfab-tiny
VERSION_ID=1
OS
ln -s ../usr/lib/os-release "$dir"/etc/os-release
echo "root:x:0:0:root:/root:/bin/sh" > "$dir"/etc/passwd
chown -R root:root "$dir"
chmod -R go-w "$dir"
chmod 0755 "$dir"
