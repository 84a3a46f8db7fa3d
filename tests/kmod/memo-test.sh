#!/usr/bin/env bash
# memo-test.sh: rxe-kvfix-prepare's memo (kmod/rxe-kvfix-prepare, "the memo"), on the
# host: no build root, no root, no kernel build. Run by tests/kmod/run (stage memo)
# with the rxe part of one matrix kernel's source (its Makefile and
# drivers/infiniband/sw/rxe, as rxe_tree there extracts them).
#
# A cache holds linux-X.Y.Z.tar.xz made here from that rxe part plus 5 MB of random
# bytes (an archive past the memo's 4 MB floor, as a real one is); prepare runs on it
# three times, each into its own --out:
#   1. the memo is empty: extracted from the archive, kept in CACHE/.memo;
#   2. the archive unchanged: taken from the memo (its message says so), the prepared
#      directory identical to the first but for nothing;
#   3. the archive touched (a new mtime, as a reinstalled package leaves it): the old
#      entry dropped, extracted again, one entry left.
# And a memo entry whose archive is gone is dropped by the next run.
#
# Cost: about 3 s (xz of 5 MB, prepare four times), measured 2026-12-06.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RXE_PROG=memo-test
export RXE_PROG
# shellcheck source=tests/testlib.sh
. "$REPO/tests/testlib.sh"
t_suite kmod-memo

t_rxe_tree_args tests/kmod/memo-test.sh "$@"

W=$(mktemp -d /var/tmp/rxe-kvfix-memo.XXXXXX)
cleanup() { rm -rf "$W"; }
trap cleanup EXIT

# shellcheck source=kmod/rxe-kvfix-lib.sh
. "$REPO/kmod/rxe-kvfix-lib.sh"
rxe_kvfix_kernel "$K"
UP=$KERNEL_UPSTREAM
CACHE=$W/cache ARCHIVE=$W/cache/linux-$UP.tar.xz
mkdir -p "$CACHE" "$W/src/linux-$UP/drivers/infiniband/sw"
cp "$TREE/Makefile" "$W/src/linux-$UP/"
cp -a "$TREE/drivers/infiniband/sw/rxe" "$W/src/linux-$UP/drivers/infiniband/sw/"
head -c 5M /dev/urandom >"$W/src/linux-$UP/padding"
tar -cJf "$ARCHIVE" -C "$W/src" "linux-$UP"

# prep N: prepare into $W/out-N; its stderr in $W/err-N
prep() {
	RXE_KVFIX_CONF=$W/none.conf "$REPO/kmod/rxe-kvfix-prepare" --cache "$CACHE" --no-fetch \
		--out "$W/out-$1" "$K" 2>"$W/err-$1" >/dev/null
}
entries() { find "$CACHE/.memo" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | wc -l; }

t_start "prepare on linux-$UP.tar.xz (5 MB past the floor), empty memo: extracted, one entry kept in CACHE/.memo"
if ! prep 1; then
	t_fail "prepare failed: $(tail -n1 "$W/err-1")"
	exit 1
elif grep -q 'taken from' "$W/err-1" || [[ $(entries) != 1 ]]; then
	t_fail "$(entries) entries; stderr: $(tr '\n' ' ' <"$W/err-1" | cut -c1-300)"
else
	t_pass
fi

t_start "the archive unchanged: the rxe source taken from the memo, the prepared directory the same"
if ! prep 2; then
	t_fail "prepare failed: $(tail -n1 "$W/err-2")"
elif ! grep -q "rxe source of .*linux-$UP.tar.xz taken from $CACHE/.memo/" "$W/err-2"; then
	t_fail "no 'taken from' line: $(tr '\n' ' ' <"$W/err-2" | cut -c1-300)"
elif ! diff -r "$W/out-1" "$W/out-2" >"$W/diff"; then
	t_fail "the two prepared directories differ: $(head -n3 "$W/diff" | tr '\n' ' ')"
else
	t_pass
fi

t_start "the archive touched (a new mtime): extracted again, the old entry dropped"
touch -d '+1 minute' "$ARCHIVE"
if ! prep 3; then
	t_fail "prepare failed: $(tail -n1 "$W/err-3")"
elif grep -q 'taken from' "$W/err-3" || [[ $(entries) != 1 ]]; then
	t_fail "$(entries) entries after; stderr: $(tr '\n' ' ' <"$W/err-3" | cut -c1-300)"
else
	t_pass
fi

t_start "the archive gone: its entry dropped by the next run (which finds no source: exit 1)"
rm -f "$ARCHIVE"
rc=0
prep 4 || rc=$?
if ((rc != 1)) || [[ $(entries) != 0 ]]; then
	t_fail "exit $rc, $(entries) entries left"
else
	t_pass
fi
