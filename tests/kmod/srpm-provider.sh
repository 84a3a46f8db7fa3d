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
