#!/usr/bin/env bash
# objcheck-test.sh: kmod/rxe-kvfix-objcheck and step 3 of kmod/rxe-kvfix-dkms-build
# on small objects made here, on the host: no kernel build, no build root, no root,
# no VM. Run first by tests/kmod/run (its stage objcheck), before any build root.
#
# The objects: two x86-64 files compiled with the host's gcc -c, whose functions
# __alloc_mr_page_info and free_mr_page_info call the kernel's kv allocator
# (__kvmalloc_node_noprof, kvfree) or its kmalloc family (__kmalloc_noprof, kfree);
# and copies of the first with the ELF header's e_machine patched to another
# architecture: ppc64le (21), riscv64 (243), s390x (22, the header made big-endian;
# only the header is read, so nothing else has to be). readelf -h must read each
# crafted header as that machine, or the case is not what it says.
#
# objcheck: kv exits 0, k exits 1, each foreign architecture "unchecked" with exit 3
# and one stderr line naming it (the check used to say nothing and exit 1 there: its
# caller then blamed the allocator), a file that is not ELF exits 2 with one line.
# dkms-build (a copy of kmod/ with a stand-in prepare, a stand-in kernel build
# directory whose `modules` copies the object in as src/rdma_rxe.ko, logger
# replaced by a file, RXE_KVFIX_STATE_DIR in a temporary directory): a foreign
# object with the fixed rxe_mr.c is built (exit 0, state=built, the message and
# the journal say the object check was skipped on that architecture); the same with
# an unfixed rxe_mr.c is not built (77); an x86-64 object calling kmalloc/kfree is
# not built (77, state=failed, the allocator named) as before; kv is built with no
# such words.
#
# Cost: about 1.5 s (gcc -c of two small files, objcheck eight times, dkms-build four
# times): 1.5-1.6 s wall, 0.6 s of CPU, measured on the project's 2-core host at a
# 1-minute load of 2-4 (another make check running), 2026-12-06.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RXE_PROG=objcheck-test
export RXE_PROG
# shellcheck source=tests/testlib.sh
. "$REPO/tests/testlib.sh"
# shellcheck source=tests/kmod/standin-lib.sh
. "$HERE/standin-lib.sh"
t_suite kmod-objcheck
OBJCHECK=$REPO/kmod/rxe-kvfix-objcheck

usage() { echo "Usage: tests/kmod/objcheck-test.sh   (host only: gcc, binutils; no root)"; }
[[ ${1:-} != -h && ${1:-} != --help ]] || {
	usage
	exit 0
}
(($# == 0)) || {
	usage >&2
	exit 2
}

W=$(mktemp -d "${TMPDIR:-/tmp}/rxe-kvfix-objcheck.XXXXXX")
# shellcheck disable=SC2317  # run at exit (rxe_on_exit)
cleanup() { rm -rf "$W"; }
rxe_on_exit cleanup

missing=()
for c in gcc objdump readelf od; do command -v "$c" >/dev/null || missing+=("$c"); done
if ((${#missing[@]})); then
	t_skip "rxe-kvfix-objcheck on objects made here" "this host lacks ${missing[*]} (apt install gcc binutils)"
	exit 0
fi
if [[ $(uname -m) != x86_64 ]]; then
	t_skip "rxe-kvfix-objcheck on objects made here" "the fixtures are x86-64 objects compiled with the host's gcc; this host is $(uname -m)"
	exit 0
fi

# --- the objects ----------------------------------------------------------------
# mr_obj NAME ALLOC FREE: NAME.o, x86-64, its MR functions calling ALLOC and FREE
mr_obj() {
	cat >"$W/$1.c" <<EOF
struct rxe_mr_page { void *page; unsigned int offset; };
struct rxe_mr { struct rxe_mr_page *page_info; unsigned int num_buf; };
extern void *$2(unsigned long size, unsigned int flags, int node);
extern void $3(const void *p);
int __alloc_mr_page_info(struct rxe_mr *mr, int num)
{
	mr->page_info = $2((unsigned long)num * sizeof(*mr->page_info), 0xdc0, -1);
	return mr->page_info ? 0 : -12;
}
void free_mr_page_info(struct rxe_mr *mr)
{
	$3(mr->page_info);
	mr->page_info = 0;
}
EOF
	gcc -O2 -c -o "$W/$1.o" "$W/$1.c"
}
# foreign SRC DST DATA MACHINE: a copy of SRC with EI_DATA (byte 5) set to DATA (1
# little-endian, 2 big-endian) and e_machine (bytes 18-19) to MACHINE in that order
foreign() {
	local lo=$(($4 & 255)) hi=$(($4 >> 8)) b
	cp "$1" "$2"
	if (($3 == 1)); then b=$(printf '\\x%02x\\x%02x' "$lo" "$hi"); else b=$(printf '\\x%02x\\x%02x' "$hi" "$lo"); fi
	# shellcheck disable=SC2059  # the escapes are the bytes
	printf "\\x$(printf %02x "$3")" | dd of="$2" bs=1 seek=5 conv=notrunc status=none
	# shellcheck disable=SC2059
	printf "$b" | dd of="$2" bs=1 seek=18 conv=notrunc status=none
}

t_start "fixtures: x86-64 objects from gcc -c, copies with e_machine ppc64le/riscv64/s390x that readelf -h reads as such"
if ! out=$(mr_obj kv __kvmalloc_node_noprof kvfree 2>&1 && mr_obj k __kmalloc_noprof kfree 2>&1); then
	t_fail "gcc -c failed: $(tail -n1 <<<"$out")"
	exit 1
fi
foreign "$W/kv.o" "$W/ppc64le.o" 1 21
foreign "$W/kv.o" "$W/riscv64.o" 1 243
foreign "$W/kv.o" "$W/s390x.o" 2 22
printf 'not an object\n' >"$W/notelf.ko"
bad=''
for pair in 'kv:Advanced Micro Devices X86-64' 'ppc64le:PowerPC64' 'riscv64:RISC-V' 's390x:IBM S/390'; do
	m=$(LC_ALL=C readelf -h "$W/${pair%%:*}.o" 2>/dev/null | sed -n 's/^ *Machine: *//p')
	[[ $m == "${pair#*:}" ]] || bad+=" ${pair%%:*}.o is '$m', not '${pair#*:}';"
done
if [[ -n $bad ]]; then
	t_fail "readelf -h:$bad"
	exit 1
fi
t_pass

# --- objcheck -------------------------------------------------------------------
# objcheck_is NAME FILE EXIT VERDICT [STDERR_REGEX]: objcheck FILE exits EXIT and
# prints VERDICT; with a regex, stderr is one line that matches it
objcheck_is() {
	local name=$1 f=$2 want=$3 verdict=$4 re=${5-} out err rc=0
	t_start "$name"
	out=$("$OBJCHECK" "$f" 2>"$W/err") || rc=$?
	err=$(<"$W/err")
	if ((rc != want)) || [[ $out != "$verdict" ]]; then
		t_fail "exit $rc and '$out', expected exit $want and '$verdict'; stderr: $(tr '\n' ' ' <<<"$err" | cut -c1-300)"
	elif [[ -n $re ]] && { [[ $(grep -c . <<<"$err") != 1 ]] || ! grep -qE "$re" <<<"$err"; }; then
		t_fail "stderr is not one line matching /$re/: $(tr '\n' ' ' <<<"$err" | cut -c1-300)"
	else
		t_pass
	fi
}
objcheck_is "objcheck: x86-64 object whose MR functions call __kvmalloc_node_noprof/kvfree: kv, exit 0" "$W/kv.o" 0 kv
objcheck_is "objcheck: x86-64 object whose MR functions call __kmalloc_noprof/kfree: k, exit 1" "$W/k.o" 1 k
if command -v xz >/dev/null && xz -c "$W/kv.o" >"$W/kv.ko.xz"; then
	objcheck_is "objcheck: the kv object as .ko.xz: kv, exit 0" "$W/kv.ko.xz" 0 kv
else
	t_skip "objcheck: the kv object as .ko.xz" "this host lacks xz (apt install xz-utils)"
fi
for a in ppc64le riscv64 s390x; do
	objcheck_is "objcheck: $a object (e_machine from the ELF header): unchecked, exit 3, one line naming $a and the patched source" \
		"$W/$a.o" 3 unchecked "^rxe-kvfix-objcheck: .*cannot check relocations on $a \\(ELF e_machine [0-9]+;.*source \\(the patch\\)$"
done
objcheck_is "objcheck: a file that is not ELF: exit 2, one line" "$W/notelf.ko" 2 '' "is not an ELF object; pass a built rdma_rxe.ko$"

# --- dkms-build, step 3 -------------------------------------------------------------
# a copy of kmod/ whose prepare is a stand-in: src/ with the rxe_mr.c of $W/mr.c and
# a provenance line; the kernel build directory's `modules` copies $W/module.o in
K=9.8.7-objcheck
mkdir -p "$W/kmod" "$W/kdir" "$W/bin" "$W/state"
cp "$REPO/META" "$W/"
cp "$REPO/kmod/rxe-kvfix-dkms-build" "$REPO/kmod/rxe-kvfix-lib.sh" "$REPO/kmod/rxe-kvfix-kernel.sh" \
	"$REPO/kmod/rxe-kvfix-record.sh" "$REPO/kmod/rxe-kvfix-lock.sh" "$REPO/kmod/rxe-kvfix-objcheck" "$W/kmod/"
# the build lock (kmod/rxe-kvfix-lock.sh) of this test's own, not the host's
export RXE_KVFIX_LOCK=$W/rxe-kvfix.lock
standin_prepare "$W/kmod/rxe-kvfix-prepare" "objcheck-test.sh" "$(
	cat <<EOF
mkdir -p "\$out"
cp "$W/mr.c" "\$out/rxe_mr.c"
echo "kernel=\$rel provider=test class=affected-kcalloc source=objcheck-test stand-in" >"\$out/rxe-kvfix-source.txt"
EOF
)"
# shellcheck disable=SC2016  # $(M) is make's
printf 'modules:\n\tcp %s $(M)/rdma_rxe.ko\n' "$W/module.o" >"$W/kdir/Makefile"
printf '#!/bin/sh\necho "$*" >>%s\n' "$W/logger.log" >"$W/bin/logger"
chmod +x "$W/kmod/rxe-kvfix-prepare" "$W/bin/logger"
# rxe_mr.c, fixed or not (classify_why reads the assignment in __alloc_mr_page_info)
mr_c() {
	printf 'static int __alloc_mr_page_info(struct rxe_mr *mr, int num)\n{\n\tmr->page_info = %s(num, sizeof(struct rxe_mr_page), GFP_KERNEL);\n\treturn 0;\n}\n\nstatic void free_mr_page_info(struct rxe_mr *mr)\n{\n\t%s(mr->page_info);\n}\n' "$1" "$2" >"$W/mr.c"
}

# build_is NAME OBJECT ALLOC FREE EXIT STATE MESSAGE_REGEX [LOGGER_REGEX]:
# dkms-build K with OBJECT as the built module and an rxe_mr.c using ALLOC/FREE
build_is() {
	local name=$1 rc=0 state msg
	t_start "$name"
	cp "$2" "$W/module.o"
	mr_c "$3" "$4"
	rm -rf "$W/build" "$W/state/status" "$W/logger.log"
	mkdir -p "$W/build"
	(cd "$W/build" && env -u RXE_KVFIX_UNPATCHED PATH="$W/bin:$PATH" RXE_KVFIX_STATE_DIR="$W/state" \
		"$W/kmod/rxe-kvfix-dkms-build" "$K" "$W/kdir") >"$W/build.log" 2>&1 || rc=$?
	state=$(sed -n 's/^state=//p' "$W/state/status/$K" 2>/dev/null)
	msg=$(sed -n 's/^message=//p' "$W/state/status/$K" 2>/dev/null)
	if ((rc != $5)) || [[ $state != "$6" ]]; then
		t_fail "exit $rc, state '$state', expected exit $5 and state $6: $(tail -n2 "$W/build.log" | tr '\n' ' ' | cut -c1-300)"
	elif ! grep -qE "$7" <<<"$msg"; then
		t_fail "the recorded message does not match /$7/: $msg"
	elif [[ -n ${8-} ]] && ! grep -qE "$8" "$W/logger.log" 2>/dev/null; then
		t_fail "nothing matching /$8/ went to logger: $(cat "$W/logger.log" 2>/dev/null)"
	else
		t_pass
		printf '     message=%s\n' "$msg"
	fi
}
build_is "dkms-build: a ppc64le module, rxe_mr.c fixed: built (exit 0), the record and the journal say the object check was skipped on ppc64le" \
	"$W/ppc64le.o" kvcalloc kvfree 0 built \
	'^built from test: objcheck-test stand-in; object check skipped on ppc64le \(.*\): the fix is checked in the compiled source only, rxe_mr.c:3 allocates with .*kvcalloc\(.* and rxe_mr.c:9 frees with kvfree\(\)$' \
	'kernel 9\.8\.7-objcheck: rxe-kvfix built; object check skipped on ppc64le'
build_is "dkms-build: an s390x module whose rxe_mr.c still uses kcalloc/kfree: NOT BUILT (77), the record says the source is not fixed" \
	"$W/s390x.o" kcalloc kfree 77 failed \
	'^the object check cannot run on s390x and the compiled src/rxe_mr.c does not read as fixed \(classify: affected-kcalloc at line 3; no kvfree'
build_is "dkms-build: an x86-64 module calling __kmalloc_noprof/kfree: NOT BUILT (77), the allocator named, as before" \
	"$W/k.o" kvcalloc kvfree 77 failed \
	'^the built rdma_rxe does not allocate the MR page array with kvcalloc\(\)/kvfree\(\) \(.*kv-alloc=0 kvfree=0 kmalloc=1 kfree=1\)'
build_is "dkms-build: an x86-64 module calling __kvmalloc_node_noprof/kvfree: built (exit 0), no word of a skipped check" \
	"$W/kv.o" kvcalloc kvfree 0 built '^built from test: objcheck-test stand-in$'

((T_FAILS == 0))
