#!/bin/sh
. "$(dirname "$0")/tap.sh"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir "$d/good" "$d/bad"
echo hi > "$d/good/index.html"
echo junk > "$d/bad/page.html"
sh ./deploy.sh "$d/good" "$d/out" > /dev/null
ok $? "a good site deploys"
[ -f "$d/out/index.html" ]; ok $? "and is copied"
sh ./deploy.sh "$d/bad" "$d/out2" > /dev/null 2>&1
st=$?
[ "$st" != 0 ]; ok $? "a site without index.html fails (exit $st)"
[ ! -e "$d/out2" ]; ok $? "and is not copied"
done_testing
