#!/usr/bin/env bash
# fedora.sh: rxe-kvfix's RPMs on a Fedora-shaped root (simulated: Debian kernel,
# DKMS's Fedora code path, Fedora's file layout), installed with rpm. Stage
# "fedora" of tests/pkg/run; tests/pkg/fedora-shape.sh makes the root from an
# overlay of the sid root, tests/pkg/in-root-rpm.sh runs each step in it:
#   1. rpm -i rxe-kvfix-dkms rxe-verify with kernel A (the root's upgrade-from
#      kernel) and the unaffected kernel of the trixie root: %post builds A from
#      the Fedora SRPM, installs under /extra, archives the in-tree module, skips
#      the unaffected kernel; rpm -V kernel-modules shows what DKMS moved
#   2. a kernel upgrade: kernel B's kernel-devel arrives, `kernel-install add`
#      runs Fedora's dkms plugin (dkms kernel_postinst): B built and resolved
#   3. the packages' life with rpm, kernels A, B and the unaffected one: rpm -U to
#      one Version higher, to one Release higher (the same Version), rpm --reinstall,
#      rpm -U --oldpackage back (tests/pkg/lifecycle-lib.sh: a line a step, each
#      saying which version DKMS has, what every kernel's rdma_rxe resolves to and
#      how many builds ran)
#   4. rpm -e: the in-tree module back, nothing of ours left
#   5. negative: the root without its source RPMs: rpm -i succeeds, DKMS fails
#      with the one-line dnf remedy, the in-tree module stays
#   5b. the life of 3. with dnf5 (Debian's) against a local repository (createrepo-c):
#      dnf5 install, upgrade, upgrade to the Release-only update, reinstall,
#      downgrade, remove (after 5: with dnf present, %post defers a missing source)
#   6. the source RPM from a dnf repository (dnf5, createrepo-c), fetched after
#      the transaction by rxe-kvfix-fetch@.service in the root booted with
#      systemd-nspawn; the repository unreachable; the boot repair
#      (tests/pkg/fedora-fetch.sh)
#
#   fedora.sh --rpms DIR --bump-rpms DIR --release-rpms DIR [--quick]
#
# The RPMs are built with Fedora's systemd macros (simulated: fedora-shaped/macros.systemd,
# build-rpm --macros), as Fedora builds them; the root has Fedora's preset policy.
# --rpms DIR       rxe-kvfix-dkms-V-R.noarch.rpm and rxe-verify-V-R.ARCH.rpm (make rpm)
# --bump-rpms DIR  rxe-kvfix-dkms of a higher Version (build-rpm --dkms-only)
# --release-rpms DIR  rxe-kvfix-dkms of that Version, one Release higher
# --quick          no unaffected kernel (it comes from the trixie root, which the
#                  quick pkg stage does not build): SKIPped with that reason
# Results: testlib lines, suite pkg-fedora; TSV appended to $RXE_RESULTS.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RXE_PROG='pkg-fedora'
export RXE_PROG
# shellcheck source=vmhost/lib.sh
. "$REPO/vmhost/lib.sh"
# shellcheck source=tests/testlib.sh
. "$REPO/tests/testlib.sh"
t_suite pkg-fedora

usage() { sed -n '/^#   fedora.sh --rpms/,/^# Results/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
RPMS='' BUMP='' RELD='' QUICK=0
while (($#)); do
	case $1 in
	--rpms)
		[[ -d ${2:-} ]] || {
			echo "fedora.sh: --rpms needs a directory" >&2
			exit 2
		}
		RPMS=$(realpath "$2")
		shift 2
		;;
	--bump-rpms)
		[[ -d ${2:-} ]] || {
			echo "fedora.sh: --bump-rpms needs a directory" >&2
			exit 2
		}
		BUMP=$(realpath "$2")
		shift 2
		;;
	--release-rpms)
		[[ -d ${2:-} ]] || {
			echo "fedora.sh: --release-rpms needs a directory" >&2
			exit 2
		}
		RELD=$(realpath "$2")
		shift 2
		;;
	--quick)
		QUICK=1
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		echo "fedora.sh: unknown argument '$1' (try --help)" >&2
		exit 2
		;;
	esac
done
[[ -n $RPMS && -n $BUMP && -n $RELD ]] || {
	usage >&2
	exit 2
}
[[ $(id -u) == 0 ]] || {
	echo "fedora.sh: needs root (chroot, overlay mounts)" >&2
	exit 2
}

echo "--- Fedora-shaped (simulated: Debian kernel, DKMS's Fedora code path, Fedora's file layout, Fedora's systemd macros and preset policy): rpm install, kernel upgrade, the life with rpm and dnf5, no SRPM"
T0=$SECONDS
A=$(rxe_matrix_role upgrade-from sid | head -n1)
B=$(rxe_matrix_primary)
[[ -n $A && -n $B && $A != "$B" ]] || {
	t_fail "Fedora-shaped: kernels" "vmhost/kernels.tsv needs an upgrade-from and a primary kernel in the sid root"
	exit 1
}
expect() { rxe_matrix_row "$1" | awk '{print $5}'; }
U=$(rxe_matrix_lines | awk '$5 == "unaffected" {print $1 " " $3; exit}')
lower=$("$REPO/vmhost/mkroot" sid | tail -n1)
unaff=()
if ((QUICK)); then
	t_skip "Fedora-shaped: an unaffected kernel skipped by %post" "--quick: its kernel comes from the trixie root, which the quick run does not build"
	U=''
elif [[ -n $U ]] && troot=$("$REPO/vmhost/mkroot" "${U#* }" | tail -n1); then
	unaff=(--unaffected "$troot:${U% *}")
	U=${U% *}
else
	t_skip "Fedora-shaped: an unaffected kernel skipped by %post" "vmhost/kernels.tsv has no unaffected kernel or its root cannot be built"
	U=''
fi

MNT=$(mktemp -d /var/tmp/rxe-kvfix-fedora.XXXXXX)
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	rxe_overlay_umount "$MNT" 2>/dev/null || true
	rmdir "$MNT" 2>/dev/null || true
}
rxe_on_exit cleanup
rxe_overlay_mount "$lower" "$MNT"
rxe_kbuild_ccache_mount "$MNT"
t0=$SECONDS
t_start "Fedora-shaped root made from the sid root: os-release fedora 44, no linux-source, /usr/src/kernels, source RPMs"
if out=$("$HERE/fedora-shape.sh" --stage "$B" --dkms-service "${unaff[@]}" "$MNT" 2>&1); then
	t_pass
	echo "     $(tail -n1 <<<"$out") ($((SECONDS - t0)) s)"
else
	t_fail "$(tail -n2 <<<"$out" | tr '\n' ' ')"
	exit 1
fi
rxe_copy_checkout "$MNT"
mkdir -p "$MNT/root/rpms" "$MNT/root/rpms-bump" "$MNT/root/rpms-release"
cp "$RPMS"/rxe-kvfix-dkms-*.noarch.rpm "$RPMS"/rxe-verify-*.rpm "$MNT/root/rpms/"
rm -f "$MNT"/root/rpms/*.src.rpm
cp "$BUMP"/rxe-kvfix-dkms-*.noarch.rpm "$MNT/root/rpms-bump/"
cp "$RELD"/rxe-kvfix-dkms-*.noarch.rpm "$MNT/root/rpms-release/"

rc=0
step() { # [LABEL] STEP ARGS...: one step of in-root-rpm.sh, its cost
	local t=$SECONDS r=0 label=$1
	[[ $1 != lifecycle-* ]] || shift
	chroot "$MNT" /usr/bin/env -i "${KBUILD_ENV[@]}" HOME=/root LANG=C.UTF-8 \
		RXE_RESULTS=/root/results.tsv /root/rxe-kvfix/tests/pkg/in-root-rpm.sh /root/rxe-kvfix "$@" || r=$?
	echo "--- Fedora-shaped $label: $((SECONDS - t)) s"
	((r == 0)) || rc=1
	return "$r"
}
specA=("$A:$(expect "$A")")
[[ -z $U ]] || specA+=("$U:unaffected")
specAll=("${specA[@]}" "$B:$(expect "$B")")
if step install /root/rpms "${specA[@]}"; then
	step kernel-upgrade "$B" || true
	step lifecycle-rpm lifecycle rpm /root/rpms /root/rpms-bump /root/rpms-release "${specAll[@]}" || true
	step erase "${specAll[@]}" || true
	# 5. the same root without its source RPMs (kept aside for 6's repository), before
	# dnf is installed: without it %post names the dnf download to run by hand
	mkdir -p "$MNT/srv/rxe-srpms"
	mv "$MNT"/var/cache/rxe-kvfix/sources/kernel-*.src.rpm "$MNT/srv/rxe-srpms/"
	step negative /root/rpms "$A" || true
	# 5b. the same life with dnf5 (Debian's, sid) against a local repository; the
	# source RPMs in the cache for it, as README tells an offline host to put them
	t=$SECONDS
	if out=$(rxe_chroot_run "$MNT" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q dnf5 createrepo-c 2>&1); then
		echo "     dnf5 and createrepo-c installed in the root: $((SECONDS - t)) s"
		cp "$MNT"/srv/rxe-srpms/kernel-*.src.rpm "$MNT/var/cache/rxe-kvfix/sources/"
		step lifecycle-dnf lifecycle dnf /root/rpms /root/rpms-bump /root/rpms-release "${specAll[@]}" || true
		rm -f "$MNT"/var/cache/rxe-kvfix/sources/kernel-*.src.rpm
	else
		t_fail "$F: the life with dnf5: setup" "apt-get install dnf5 createrepo-c: $(tail -n2 <<<"$out" | tr '\n' ' ')"
		rc=1
	fi
	# 6. B's source RPM from a dnf repository, outside the transaction
	t=$SECONDS
	"$HERE/fedora-fetch.sh" "$MNT" /root/rpms "$B" || rc=1
	echo "--- Fedora-shaped dnf-fetch: $((SECONDS - t)) s"
fi
[[ -z ${RXE_RESULTS:-} || ! -f $MNT/root/results.tsv ]] || cat "$MNT/root/results.tsv" >>"$RXE_RESULTS"
echo "--- Fedora-shaped total: $((SECONDS - T0)) s"
exit "$rc"
