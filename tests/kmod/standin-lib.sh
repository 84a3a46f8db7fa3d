# shellcheck shell=bash
# tests/kmod/standin-lib.sh: stand-ins shared by the host tests of this folder
# (objcheck-test.sh, lock-test.sh), each labelled a stand-in in what it writes.
#
# standin_prepare FILE TEST BODY: an executable stand-in for kmod/rxe-kvfix-prepare at
# FILE, its comment naming TEST (the test script that uses it and what it does): it
# takes prepare's arguments ([--facts FILE] --out DIR RELEASE) into $out and $rel, then
# runs BODY (shell text, written as given)
standin_prepare() {
	{
		printf '#!/usr/bin/env bash\n# stand-in for tests/kmod/%s: prepare [--facts FILE] --out DIR RELEASE\nset -euo pipefail\n' "$2"
		cat <<'PREP'
out='' rel=''
while (($#)); do
	case $1 in
	--out) out=$2; shift ;;
	--facts) shift ;;
	*) rel=$1 ;;
	esac
	shift
done
PREP
		printf '%s\n' "$3"
	} >"$1"
	chmod +x "$1"
}
