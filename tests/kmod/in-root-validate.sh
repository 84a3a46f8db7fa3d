#!/usr/bin/env bash
# in-root-validate.sh: patches/validate on the full source tree of KERNEL
# (Debian's linux-source tarball installed in the build root, extracted at
# test time), with that tree's checkpatch, built against KERNEL's headers.
#
#   in-root-validate.sh SRC KERNEL
set -euo pipefail

usage() { echo "Usage: in-root-validate.sh SRC KERNELRELEASE"; }
[[ ${1:-} != -h && ${1:-} != --help ]] || { usage; exit 0; }
(($# == 2)) || { usage >&2; exit 2; }
SRC=$1 K=$2
# shellcheck source=tests/testlib.sh
. "$SRC/tests/testlib.sh"
t_suite patches
XY=$(cut -d. -f1,2 <<<"$K")

t_start "$K: full linux-source-$XY tree extracted"
mkdir -p /tmp/tree
if tar -xf "/usr/src/linux-source-$XY.tar.xz" -C /tmp/tree --strip-components=1; then t_pass; else t_fail "tar failed"; exit 1; fi

t_start "$K: patches/validate (apply, checkpatch --strict, build)"
if out=$("$SRC/patches/validate" --kdir "/lib/modules/$K/build" /tmp/tree 2>&1); then
	t_pass
	printf '%s\n' "$out" | sed 's/^/     /'
else
	t_fail "$(grep -E 'FAIL' <<<"$out" | head -n3 | tr '\n' ' ')"
	printf '%s\n' "$out" | sed 's/^/     /'
fi
exit $((T_FAILS > 0))
