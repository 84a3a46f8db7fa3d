#!/usr/bin/env bash
# tests/vm/tools/copy-checkout-test.sh: vmhost/lib.sh's rxe_copy_checkout while build
# directories appear and vanish beside the sources, as make check's other stages make
# them (build-sanitize, build-fuzz, ...) while the vm stage copies the checkout into
# its overlays. Copies a scratch checkout 5 times with a churn loop running; each copy
# must exit 0, hold every source file and no build directory. About 2 s.
# Exit: 0 pass, 1 fail, 2 usage.
set -euo pipefail

usage() { echo "usage: ${0##*/} (no arguments)"; }
(($# == 0)) || {
	usage >&2
	exit 2
}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
# shellcheck source=vmhost/lib.sh
. "$REPO/vmhost/lib.sh"

TMP=$(mktemp -d)
churn=''
# the churn loop ends by itself once $TMP/stop exists (a kill would end the loop's
# shell and leave its mkdir running, which could make build-churn again while rm
# walks the tree: "Directory not empty")
cleanup() {
	touch "$TMP/stop"
	[[ -z $churn ]] || wait "$churn" 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT

# a scratch checkout: this one's sources (what a copy must hold), no build output
mkdir -p "$TMP/src" "$TMP/src/build" "$TMP/src/results"
(cd "$REPO" && git ls-files -z 2>/dev/null | head -zn 400 | tar --null -T - -cf -) | tar -C "$TMP/src" -xf -
echo x >"$TMP/src/build/out.o"
nfiles=$(cd "$TMP/src" && find . -path ./build -prune -o -path ./results -prune -o -type f -print | wc -l)
((nfiles > 50)) || {
	echo "copy-checkout-test: only $nfiles files in the scratch checkout (is $REPO a git checkout?)" >&2
	exit 1
}
(
	cd "$TMP/src"
	while [[ ! -e $TMP/stop ]]; do
		mkdir -p build-churn/a && touch build-churn/a/b
		rm -rf build-churn
	done
) &
churn=$!
# shellcheck disable=SC2034  # read by rxe_copy_checkout (vmhost/lib.sh)
REPO_DIR=$TMP/src
fails=0
for i in 1 2 3 4 5; do
	rm -rf "$TMP/dst"
	mkdir -p "$TMP/dst"
	if ! out=$(rxe_copy_checkout "$TMP/dst" 2>&1); then
		echo "copy $i: rxe_copy_checkout failed: $out"
		fails=$((fails + 1))
		continue
	fi
	got=$(find "$TMP/dst/root/rxe-kvfix" -type f | wc -l)
	if ((got != nfiles)) || [[ -e $TMP/dst/root/rxe-kvfix/build || -e $TMP/dst/root/rxe-kvfix/results ]]; then
		echo "copy $i: $got files of $nfiles, or build output copied"
		fails=$((fails + 1))
	fi
done
((fails == 0)) || exit 1
echo "5 copies of $nfiles files, each whole, with build directories churning beside them"
