#!/usr/bin/env bash
# in-root-validate.sh: patches/validate on the full source tree of KERNEL
# (Debian's linux-source tarball installed in the build root), with that tree's
# checkpatch, built against KERNEL's headers.
#
#   in-root-validate.sh SRC KERNEL [TREE]
#
# TREE: the tree already extracted from that tarball, mounted read-only (tests/kmod/run
# keeps one per source version in the harness cache; read-only also proves that
# validate never writes to the tree it is given). Without TREE the tarball is
# extracted here, to /tmp/tree.
set -euo pipefail

usage() { echo "Usage: in-root-validate.sh SRC KERNELRELEASE [TREE]"; }
[[ ${1:-} != -h && ${1:-} != --help ]] || {
	usage
	exit 0
}
(($# == 2 || $# == 3)) || {
	usage >&2
	exit 2
}
SRC=$1 K=$2 TREE=${3:-}
# shellcheck source=tests/testlib.sh
. "$SRC/tests/testlib.sh"
t_suite patches
XY=$(cut -d. -f1,2 <<<"$K")

if [[ -n $TREE ]]; then
	t_start "$K: full linux-source-$XY tree, read-only at $TREE"
	if [[ -f $TREE/Makefile && -x $TREE/scripts/checkpatch.pl && -f $TREE/drivers/infiniband/sw/rxe/rxe_mr.c ]] &&
		! touch "$TREE/.rxe-kvfix-write-probe" 2>/dev/null; then
		t_pass
	else
		rm -f "$TREE/.rxe-kvfix-write-probe" 2>/dev/null # a writable tree keeps nothing of ours
		t_fail "not a kernel tree, or writable (Makefile, scripts/checkpatch.pl, rxe_mr.c; a write must fail)"
		exit 1
	fi
else
	TREE=/tmp/tree
	t_start "$K: full linux-source-$XY tree extracted"
	mkdir -p "$TREE"
	if tar -xf "/usr/src/linux-source-$XY.tar.xz" -C "$TREE" --strip-components=1; then t_pass; else
		t_fail "tar failed"
		exit 1
	fi
fi

# as README says: make validate-patch (patches/validate --kdir KDIR KTREE)
t_start "$K: make validate-patch KTREE=$TREE KDIR=/lib/modules/$K/build (patches/validate: apply, checkpatch --strict, build)"
# OUT: a work directory of the same path in every run (this root is a fresh overlay),
# so that kbuild through the harness's ccache meets the same paths and hits: with
# validate's own mktemp directory all of rdma_rxe compiled again in every run
if out=$(make -s --no-print-directory -C "$SRC" validate-patch KTREE="$TREE" KDIR="/lib/modules/$K/build" OUT=/tmp/rxe-kvfix-validate 2>&1); then
	t_pass
	printf '%s\n' "$out" | sed 's/^/     /'
else
	t_fail "$(grep -E 'FAIL' <<<"$out" | head -n3 | tr '\n' ' ')"
	printf '%s\n' "$out" | sed 's/^/     /'
fi
exit $((T_FAILS > 0))
