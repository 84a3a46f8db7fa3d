#!/usr/bin/env bash
# in-root-dkms.sh: the DKMS life cycle of rxe-kvfix for every kernel of one
# build root, run inside that root (chroot, as root) the way a user runs it.
#
#   in-root-dkms.sh SRC ROOTNAME RELEASE:EXPECT...
#
# SRC is a copy of the rxe-kvfix checkout. For each affected kernel: dkms
# build + install succeed, the installed module is the one modprobe resolves,
# has the kernel's vermagic and our identification, its MR code calls the kv
# allocator (relocations) while the stock module's calls kmalloc/kfree, and
# the prepared source uses kvcalloc/kvfree. For an unaffected kernel: dkms
# autoinstall succeeds, says it skipped and why, and the in-tree module stays.
# Then: a second install is idempotent, all kernels keep their own module at
# once, and dkms remove brings the stock module back. The tree is registered
# as README's "from a clone" says: `dkms add .` inside SRC.
#
# --install-paths TARBALL KERNEL: then README's other ways to install from a
# tree, on KERNEL (one DKMS build each): make dist's TARBALL unpacked into
# /usr/src, dkms add -m/-v, dkms install, dkms remove --all; make dkms-install,
# make dkms-remove. And their bad inputs with the real DKMS: a tree copied to a
# /usr/src name that is not its dkms.conf's version, and make dkms-install of
# a second version while this one is installed.
set -euo pipefail

usage() { echo "Usage: in-root-dkms.sh [--install-paths TARBALL KERNEL] SRC ROOTNAME RELEASE:EXPECT..."; }
[[ ${1:-} != -h && ${1:-} != --help ]] || {
	usage
	exit 0
}
TARBALL='' PK=''
if [[ ${1:-} == --install-paths ]]; then
	(($# >= 3)) || {
		usage >&2
		exit 2
	}
	TARBALL=$2 PK=$3
	shift 3
fi
(($# >= 3)) || {
	usage >&2
	exit 2
}
SRC=$1 ROOTNAME=$2
shift 2

# shellcheck source=tests/testlib.sh
. "$SRC/tests/testlib.sh"
t_suite dkms
M=rxe-kvfix
# shellcheck source=kmod/rxe-kvfix-lib.sh
. "$SRC/kmod/rxe-kvfix-lib.sh"
VER=$(rxe_kvfix_meta_version "$SRC")
LOG=/tmp/in-root-dkms.log
: >"$LOG"

intree() { find "/lib/modules/$1/kernel" -name 'rdma_rxe.ko*' | head -n1; }
resolved() { modinfo -k "$1" -n rdma_rxe 2>/dev/null; }
ours_installed() { find "/lib/modules/$1/updates" "/lib/modules/$1/extra" -name 'rdma_rxe.ko*' 2>/dev/null | grep -q .; }
run() { # log the command and its output, return its status
	printf '\n$ %s\n' "$*" >>"$LOG"
	"$@" >>"$LOG" 2>&1
}
fail_with_log() { t_fail "$1 ($(tail -n 2 "$LOG" | tr '\n' ' ' | cut -c1-300))"; }

t_start "$ROOTNAME: dkms add . (in the clone: $SRC)"
if (cd "$SRC" && run dkms add .) && [[ -f /usr/src/$M-$VER/dkms.conf && $(dkms status -m "$M") == "$M/$VER: added" ]]; then
	t_pass
else
	fail_with_log "dkms add . failed or did not register $M/$VER from /usr/src/$M-$VER"
fi

affected=()
for spec in "$@"; do
	K=${spec%%:*} E=${spec#*:}
	stock=$(intree "$K")
	if [[ -z $stock ]]; then
		t_fail "$K: in-tree module" "no in-tree rdma_rxe.ko* under /lib/modules/$K/kernel"
		continue
	fi
	case $E in
	affected-*)
		affected+=("$K")
		# before install: DKMS moves the in-tree module aside (into
		# /var/lib/dkms/rxe-kvfix/original_module) and puts it back on remove
		t_start "$K: stock module's MR code calls kmalloc/kfree (the check discriminates)"
		got=$("$SRC/kmod/rxe-kvfix-objcheck" "$stock" 2>>"$LOG" || true)
		if [[ $got == k ]]; then t_pass; else t_fail "objcheck on $stock says '$got'"; fi
		t_start "$K: dkms build"
		if run dkms build "$M/$VER" -k "$K"; then t_pass; else
			fail_with_log "dkms build failed"
			continue
		fi
		t_start "$K: dkms install $M/$VER -k $K"
		if run dkms install "$M/$VER" -k "$K"; then t_pass; else
			fail_with_log "dkms install failed"
			continue
		fi

		path=$(resolved "$K")
		t_start "$K: modinfo -n resolves to the DKMS module"
		if [[ $path == */updates/dkms/rdma_rxe.ko* ]]; then t_pass; else t_fail "modinfo -n rdma_rxe is $path"; fi
		t_start "$K: modprobe --show-depends loads the DKMS module"
		deps=$(modprobe -S "$K" --show-depends rdma_rxe 2>&1 || true)
		if grep -q "^insmod .*/updates/dkms/rdma_rxe.ko" <<<"$deps"; then t_pass; else t_fail "$(tail -n1 <<<"$deps")"; fi
		t_start "$K: vermagic"
		vm=$(modinfo -F vermagic "$path" | awk '{print $1}')
		if [[ $vm == "$K" ]]; then t_pass; else t_fail "vermagic '$vm' is not $K"; fi
		t_start "$K: module identifies itself as rxe-kvfix"
		id=$(modinfo -F rxe_kvfix "$path")
		v=$(modinfo -F version "$path")
		if [[ $v == "$VER-rxe-kvfix" && $id == "$VER fix=kvcalloc "*"shape=${E#affected-}"* ]]; then
			t_pass
		else
			t_fail "version='$v' rxe_kvfix='$id'"
		fi
		t_start "$K: DKMS signed the module with its MOK key"
		signer=$(modinfo -F signer "$path" 2>/dev/null || true)
		if [[ ! -f /var/lib/dkms/mok.key ]]; then
			t_skip "no /var/lib/dkms/mok.key in this root"
		elif [[ $signer == "rxe-kvfix test MOK" ]]; then
			t_pass
		else
			t_fail "modinfo -F signer says '$signer'"
		fi
		t_start "$K: installed module's MR code calls kvmalloc/kvfree"
		if got=$("$SRC/kmod/rxe-kvfix-objcheck" "$path" 2>>"$LOG"); then t_pass; else t_fail "objcheck says '$got'"; fi
		t_start "$K: prepared source uses kvcalloc/kvfree for page_info"
		logdir=/var/lib/dkms/$M/$VER/$K/$(uname -m)/log
		if grep -q 'page_info = kvcalloc(' "$logdir/rxe_mr.c" && grep -q 'kvfree(mr->page_info)' "$logdir/rxe_mr.c" &&
			! grep -q 'kfree(mr->page_info)' "$logdir/rxe_mr.c" && grep -q "class=$E " "$logdir/rxe-kvfix-source.txt"; then
			t_pass
		else
			t_fail "$logdir/rxe_mr.c or rxe-kvfix-source.txt not as expected: $(cat "$logdir/rxe-kvfix-source.txt" 2>&1)"
		fi
		t_start "$K: a second dkms install is idempotent"
		if run dkms install "$M/$VER" -k "$K" && [[ $(resolved "$K") == "$path" ]]; then t_pass; else fail_with_log "second install"; fi
		;;
	unaffected | fixed)
		t_start "$K: dkms autoinstall skips an $E kernel cleanly"
		rc=0
		out=$(dkms autoinstall -k "$K" 2>&1) || rc=$?
		printf '%s\n' "$out" >>"$LOG"
		mklog=/var/lib/dkms/$M/$VER/build/make.log
		if ((rc != 0)); then
			t_fail "dkms autoinstall exited $rc"
		elif ! grep -q "skipped for module(s) $M" <<<"$out"; then
			t_fail "dkms autoinstall did not report a skip: $(tail -n1 <<<"$out")"
		elif ! grep -q "not affected, skipping\|already allocates" "$mklog"; then
			t_fail "no reason in $mklog"
		elif ours_installed "$K" || [[ $(resolved "$K") != "$stock" ]]; then
			t_fail "a module of ours is installed or modinfo -n is $(resolved "$K")"
		else
			t_pass
			grep -h 'rxe-kvfix-prepare: kernel' "$mklog" | tail -n1 | sed 's/^/     reason shown: /'
		fi
		;;
	*) t_fail "$K: matrix" "unknown expectation '$E'" ;;
	esac
done

if ((${#affected[@]} > 1)); then
	t_start "$ROOTNAME: ${#affected[@]} kernels keep their own module at once"
	bad=''
	for K in "${affected[@]}"; do
		p=$(resolved "$K")
		[[ $p == "/lib/modules/$K/updates/dkms/"* && $(modinfo -F vermagic "$p" | awk '{print $1}') == "$K" ]] || bad+=" $K:$p"
	done
	if [[ -z $bad ]]; then t_pass; else t_fail "wrong module for$bad"; fi
fi

# stock K: nothing of ours for K, modinfo -n and modprobe resolve the in-tree module
stock() {
	local s
	s=$(intree "$1")
	! ours_installed "$1" && [[ -f $s && $(resolved "$1") == "$s" ]] &&
		modprobe -S "$1" --show-depends rdma_rxe 2>/dev/null | grep -qx "insmod $s *"
}
# ours K: the DKMS module of version VER resolves for K
ours() {
	local p
	p=$(resolved "$1")
	[[ $p == */updates/dkms/rdma_rxe.ko* && $(modinfo -F version "$p") == "$VER-rxe-kvfix" ]]
}

t_start "$ROOTNAME: dkms remove $M/$VER --all restores the stock module (modinfo -n, modprobe --show-depends)"
if run dkms remove "$M/$VER" --all; then
	bad=''
	for spec in "$@"; do
		K=${spec%%:*}
		stock "$K" || bad+=" $K:$(resolved "$K")"
	done
	if [[ -z $bad ]]; then t_pass; else t_fail "after remove:$bad"; fi
else
	fail_with_log "dkms remove failed"
fi
rm -rf "/usr/src/$M-$VER"
[[ -n $TARBALL ]] || exit $((T_FAILS > 0))

# --- README's other ways to install from a tree, on PK
T=$(basename "$TARBALL")
t_start "$ROOTNAME: a tree in /usr/src/$M-9.9.9 whose dkms.conf says $VER: dkms install fails at PRE_BUILD with one line in make.log, nothing installed"
mkdir -p "/usr/src/$M-9.9.9"
tar -xzf "$TARBALL" --strip-components=1 -C "/usr/src/$M-9.9.9"
rc=0
run dkms add -m "$M" -v 9.9.9 && run dkms install -m "$M" -v 9.9.9 -k "$PK" || rc=$?
line=$(grep -h "^rxe-kvfix-prepare: error:" "/var/lib/dkms/$M/9.9.9/build/make.log" 2>/dev/null || true)
if ((rc == 0)); then
	t_fail "dkms install of the misnamed tree succeeded"
elif [[ $(grep -c . <<<"$line") != 1 || $line != *"registered this tree as $M/9.9.9 but its dkms.conf says version $VER; run dkms remove $M/9.9.9 --all"* ]]; then
	fail_with_log "make.log does not hold the one line: '$line'"
elif ! stock "$PK"; then
	t_fail "after the refused install modinfo -n rdma_rxe is $(resolved "$PK")"
else
	t_pass
	echo "     $line"
fi
run dkms remove "$M/9.9.9" --all || true
rm -rf "/usr/src/$M-9.9.9"

t_start "$ROOTNAME: tar -xzf $T -C /usr/src; dkms add -m $M -v $VER; dkms install -m $M -v $VER -k $PK"
if run tar -xzf "$TARBALL" -C /usr/src && run dkms add -m "$M" -v "$VER" && run dkms install -m "$M" -v "$VER" -k "$PK" && ours "$PK"; then
	t_pass
else
	fail_with_log "install from the release tarball (modinfo -n: $(resolved "$PK"))"
fi
t_start "$ROOTNAME: dkms remove $M/$VER --all after the tarball install: the stock module is back"
if run dkms remove "$M/$VER" --all && stock "$PK"; then t_pass; else fail_with_log "modinfo -n: $(resolved "$PK")"; fi
rm -rf "/usr/src/$M-$VER"

t_start "$ROOTNAME: make dkms-install KVER=$PK (in the clone)"
if run make -C "$SRC" dkms-install KVER="$PK" && ours "$PK"; then t_pass; else fail_with_log "modinfo -n: $(resolved "$PK")"; fi

t_start "$ROOTNAME: make dkms-install of a second version while $VER is installed: one line, nothing changed"
second=/tmp/rxe-kvfix-second
rm -rf "$second" && cp -a "$SRC" "$second"
rxe_kvfix_set_version "$second" 9.9.8
before=$(
	dkms status
	ls /usr/src /var/lib/dkms/"$M"
)
rc=0
err=$(make -s -C "$second" dkms-install KVER="$PK" 2>&1 >/dev/null | grep -Ev '^make(\[[0-9]+\])?: \*\*\*') || rc=$?
after=$(
	dkms status
	ls /usr/src /var/lib/dkms/"$M"
)
if [[ $err != "make: $M $VER is already registered with DKMS; remove it first (dkms remove $M/$VER --all), then run make dkms-install again" ]]; then
	t_fail "make said: $err"
elif [[ $before != "$after" ]] || ! ours "$PK"; then
	t_fail "something changed: $(diff <(echo "$before") <(echo "$after") | tr '\n' ' ')"
else
	t_pass
	echo "     $err"
fi
rm -rf "$second"

t_start "$ROOTNAME: make dkms-remove (in the clone): the stock module is back, nothing of ours in DKMS or /usr/src"
if run make -C "$SRC" dkms-remove && stock "$PK" && [[ -z $(dkms status -m "$M") && ! -e /usr/src/$M-$VER ]]; then
	t_pass
else
	fail_with_log "modinfo -n: $(resolved "$PK"), dkms status: $(dkms status -m "$M" | tr '\n' ' ')"
fi
exit $((T_FAILS > 0))
