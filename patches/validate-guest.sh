#!/usr/bin/env bash
# validate.sh: the boot part of patches/validate --boot, in one guest booted by
# vmhost/vm-run on kernel K: the proof (guest/proof.sh) and rdma-core's pyverbs
# MR/RDMA tests (guest/pyverbs.sh) on two module files built from the reviewer's
# tree, without and with the series, against K's headers.
#
#   validate.sh KERNELRELEASE EXPECT UNPATCHED_KO PATCHED_KO
#
# The unpatched module must fail 1 GiB + 16 B, 1025 MiB, 2 GiB and 4 GiB with the
# metadata diagnosis and the page-allocator WARN; the patched one must pass them
# with verified WRITE/READ, the full-span loop and probe, dmesg clean; no pyverbs
# test that passes unpatched may fail patched. perftest over a 1 GiB+ MR is left to
# the proof scenario (rxe-verify makes the same transfers here).
set -uo pipefail

usage() { echo "Usage: validate.sh KERNELRELEASE EXPECT UNPATCHED_KO PATCHED_KO"; }
# shellcheck source=vmhost/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../vmhost/guest/lib.sh"
rxe_guest_main vm-validate 4 4 "$@"
K=$1 EXPECT=$2 U=$3 P=$4
G=$SRC/vmhost/guest
for ko in "$U" "$P"; do [[ -f $ko ]] || rxe_fail "no module file $ko in the guest"; done
[[ $EXPECT == affected-* ]] || rxe_fail "$K is $EXPECT: the proof needs an affected kernel"

rc=0
"$G/proof.sh" "$K" "$EXPECT" "stock=$U,fixed=$P" "" || rc=1
"$G/pyverbs.sh" "$K" "$U" "$P" || rc=1
exit "$rc"
