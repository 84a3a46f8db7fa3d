#!/usr/bin/env bash
# srpm-provider.sh: the Fedora source RPM provider of kmod/rxe-kvfix-prepare.
#
# No Fedora archive is reachable from these machines, so the test makes a
# source RPM shaped like Fedora's kernel SRPM at test time with rpmbuild:
# linux-<upstream>.tar.xz (here: the top Makefile and rxe directory of
# Debian's linux-source of the same upstream version) plus a
# patch-X.Y-redhat.patch that changes one rxe file and one file outside rxe.
# prepare must pick the tarball, apply only the rxe part of the distribution
# patch, then our fix; and refuse truncated or mismatched SRPMs.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RXE_PROG='srpm-provider'
export RXE_PROG
# shellcheck source=vmhost/lib.sh
. "$REPO/vmhost/lib.sh"
# shellcheck source=tests/testlib.sh
. "$REPO/tests/testlib.sh"
t_suite kmod-srpm
PREP=$REPO/kmod/rxe-kvfix-prepare

usage() { echo "Usage: tests/kmod/srpm-provider.sh   (needs root to install rpm; uses the sid build root)"; }
[[ ${1:-} != -h && ${1:-} != --help ]] || {
	usage
	exit 0
}
(($# == 0)) || {
	usage >&2
	exit 2
}

rxe_need_host rpmbuild:rpm rpm2cpio:rpm2cpio cpio:cpio
W=$(mktemp -d /var/tmp/rxe-kvfix-srpm.XXXXXX)
# shellcheck disable=SC2317  # run at exit (rxe_on_exit)
cleanup() { rm -rf "$W"; }
rxe_on_exit cleanup

lower=$("$REPO/vmhost/mkroot" sid | tail -n1)
K=$(rxe_matrix_lines sid | awk '{print $1}' | sort -V | tail -n1)
UP=${K%%+*}
XY=$(cut -d. -f1,2 <<<"$UP")
FREL=$UP-200.fc44.x86_64

t_start "make a Fedora-shaped kernel-$UP-200.fc44.src.rpm"
# the distribution patch: one rxe change (kept) and one top-level change (dropped)
if SRPM=$(t_fedora_srpm "$lower/usr/src/linux-source-$XY.tar.xz" "$UP" "$W" \
	'fedora-distro-change: kept by rxe-kvfix-prepare' fedora-test "test kernel source package shaped like Fedora's" 2>"$W/srpm.err") && [[ -f $SRPM ]]; then
	t_pass
else
	t_fail "$(tail -n1 "$W/srpm.err")"
	exit 1
fi

t_start "prepare --srpm: tarball + rxe part of the distro patch + our fix"
if out=$("$PREP" --srpm "$SRPM" --cache "$W/none" --out "$W/out1" "$FREL" 2>&1) &&
	grep -q 'provider=srpm' "$W/out1/rxe-kvfix-source.txt" &&
	grep -q 'fedora-distro-change' "$W/out1/rxe_verbs.c" &&
	grep -q 'page_info = kvcalloc(' "$W/out1/rxe_mr.c" &&
	grep -q 'applied the rxe part of distribution patch' <<<"$out"; then
	t_pass
else
	t_fail "$(tail -n2 <<<"$out" | tr '\n' ' ')"
fi

# Fedora's full layout (simulated, tests/pkg/fedora-full-srpm.sh): Source0 the whole
# tree's linux-X.Y.Z.tar.xz (230 MiB; made once from the sid root's linux-source and
# kept), a git-format redhat patch that changes rxe_verbs.c, adds rxe/rxe_fedora_full.h
# (--- /dev/null) and changes the top Makefile; /tmp a 64 KiB tmpfs, as Fedora's /tmp is
# one: prepare unpacks the source RPM under /var/tmp. /var/tmp's use by prepare's work
# directory is sampled every 0.5 s. Cost: about 40 s warm (xz reads the whole tree),
# plus the source RPM's making when not kept (fedora-full-srpm.sh says how long).
t_start "prepare --srpm, Fedora's full layout (the whole tree's linux-$UP.tar.xz, a git-format redhat patch adding rxe/rxe_fedora_full.h), /tmp a 64 KiB tmpfs: rxe extracted under /var/tmp, the patch's rxe part applied, the added file in the module source"
t0=$SECONDS
if full=$("$REPO/tests/pkg/fedora-full-srpm.sh" "$(readlink -f "$lower/usr/src/linux-source-$XY.tar.xz")" "$UP" 2>"$W/full.err" | tail -n1) && [[ -f $full ]]; then
	made=$((SECONDS - t0))
	before=$(find /var/tmp -maxdepth 1 -name 'rxe-kvfix-prepare.*' | sort)
	(
		p=0
		while [[ ! -f $W/full.done ]]; do
			s=0
			for d in $(comm -13 <(echo "$before") <(find /var/tmp -maxdepth 1 -name 'rxe-kvfix-prepare.*' | sort)); do
				s=$((s + $(du -sk "$d" 2>/dev/null | cut -f1 || echo 0)))
			done
			((s <= p)) || { p=$s && echo "$p" >"$W/full.peak"; }
			sleep 0.5
		done
	) &
	sampler=$!
	t1=$SECONDS rc=0
	# The checkout itself may be under /tmp (a clone there, as CI's may be): the tmpfs
	# would hide it. Its directory is bound aside first and put back at the same path
	# inside the tmpfs (a bind mount: nothing of it is written to the tmpfs).
	mkdir -p "$W/checkout"
	# shellcheck disable=SC2016 # expanded by the inner sh
	out=$(unshare -m sh -c 'mount --bind "$2" "$1" && mount -t tmpfs -o size=64k tmpfs /tmp &&
		mkdir -p "$2" && mount --bind "$1" "$2" && shift 2 && exec "$@"' \
		_ "$W/checkout" "$REPO" "$PREP" --srpm "$full" --cache "$W/none" --out "$W/out-full" "$FREL" 2>&1) || rc=$?
	secs=$((SECONDS - t1))
	touch "$W/full.done"
	wait "$sampler" || true
	if ((rc == 0)) && grep -q 'provider=srpm' "$W/out-full/rxe-kvfix-source.txt" &&
		grep -q 'fedora-full-srpm: applied by rxe-kvfix-prepare' "$W/out-full/rxe_verbs.c" &&
		grep -q 'RXE_FEDORA_FULL' "$W/out-full/rxe_fedora_full.h" && grep -q 'page_info = kvcalloc(' "$W/out-full/rxe_mr.c"; then
		t_pass
		echo "     source RPM $(($(stat -c %s "$full") / 1048576)) MiB ($made s to have it); prepare $secs s; prepare's work directory under /var/tmp peaked at $(($(cat "$W/full.peak" 2>/dev/null || echo 0) / 1024)) MiB (sampled)"
	else
		t_fail "exit $rc: $(tail -n2 <<<"$out" | tr '\n' ' ' | cut -c1-400); out: $(find "$W/out-full" -maxdepth 1 -printf '%f ' 2>&1 | cut -c1-300)"
	fi
else
	t_fail "fedora-full-srpm.sh: $(tail -n1 "$W/full.err")"
fi

t_start "prepare finds kernel-<version>-<release>.src.rpm in the cache directory"
mkdir -p "$W/cache"
cp "$SRPM" "$W/cache/kernel-${FREL%.*}.src.rpm"
if out=$("$PREP" --cache "$W/cache" --out "$W/out2" "$FREL" 2>&1) && grep -q 'source: srpm' <<<"$out"; then
	t_pass
else
	t_fail "$(tail -n1 <<<"$out")"
fi

# cpio stops reading at the archive's trailer; a writer that pads its last block
# after that (rpm 6's libarchive-based rpm2cpio) then writes into a closed pipe.
# prepare unpacks through a file, so such a writer cannot fail a good SRPM: a stand-in
# rpm2cpio ahead on PATH runs the real one, then writes 64 KiB more after a pause.
t_start "an rpm2cpio that writes after the cpio trailer: the SRPM still unpacks"
mkdir -p "$W/padbin"
cat >"$W/padbin/rpm2cpio" <<PAD
#!/usr/bin/env bash
set -euo pipefail
$(command -v rpm2cpio) "\$@"
sleep 0.5
head -c 65536 /dev/zero
PAD
chmod +x "$W/padbin/rpm2cpio"
if out=$(PATH=$W/padbin:$PATH "$PREP" --srpm "$SRPM" --cache "$W/none" --out "$W/out-pad" "$FREL" 2>&1) &&
	grep -q 'provider=srpm' "$W/out-pad/rxe-kvfix-source.txt"; then
	t_pass
else
	t_fail "$(tail -n2 <<<"$out" | tr '\n' ' ')"
fi

t_start "truncated source RPM: one-line error"
head -c 20000 "$SRPM" >"$W/cache/kernel-${FREL%.*}.src.rpm"
rc=0
out=$("$PREP" --cache "$W/cache" --out "$W/out3" "$FREL" 2>&1) || rc=$?
if ((rc == 1)) && [[ $(wc -l <<<"$out") == 1 ]] && grep -q 'error: .*corrupt or truncated\|error: .*holds no linux' <<<"$out" && [[ ! -e $W/out3 ]]; then
	t_pass
	echo "     $out"
else
	t_fail "exit $rc: $out"
fi

t_start "source RPM of another version: refused"
rc=0
out=$("$PREP" --srpm "$SRPM" --cache "$W/none" --out "$W/out4" "$XY.999-200.fc44.x86_64" 2>&1) || rc=$?
if ((rc == 1)) && grep -q "holds linux $UP, not $XY.999.*add --force" <<<"$out" && [[ ! -e $W/out4 ]]; then
	t_pass
	echo "     $out"
else
	t_fail "exit $rc: $out"
fi

# a kernel whose release is not Fedora's N-V-R.arch (the Fedora-shaped test root
# runs Debian kernels): the one SRPM of its upstream version in the cache
t_start "release not of Fedora's form: the one kernel-$UP-*.src.rpm in the cache is used"
mkdir -p "$W/cache2"
cp "$SRPM" "$W/cache2/kernel-$UP-200.fc44.src.rpm"
if out=$("$PREP" --cache "$W/cache2" --out "$W/out5" "$UP+test-amd64" 2>&1) && grep -q 'provider=srpm' "$W/out5/rxe-kvfix-source.txt"; then
	t_pass
	grep -m1 "using kernel-$UP" <<<"$out" | sed 's/^/     /'
else
	t_fail "$(tail -n1 <<<"$out")"
fi

# no source on a host whose os-release names Fedora: the dnf5 remedy, one line
t_start "no source on Fedora (os-release ID=fedora): one line with dnf download --srpm kernel-<nvr>"
printf 'ID=fedora\nVERSION_ID=44\n' >"$W/os-release"
rc=0
out=$(RXE_KVFIX_OS_RELEASE=$W/os-release "$PREP" --cache "$W/none" --out "$W/out6" "$FREL" 2>&1) || rc=$?
if ((rc == 1)) && [[ $(wc -l <<<"$out") == 1 ]] && grep -q "; dnf download --srpm kernel-${FREL%.*} && mkdir -p $W/none && mv kernel-\*.src.rpm $W/none/" <<<"$out" && [[ ! -e $W/out6 ]]; then
	t_pass
	echo "     $out"
else
	t_fail "exit $rc: $out"
fi
exit $((T_FAILS > 0))
