#!/usr/bin/env bash
# dkms-floor.sh: the DKMS floor (META's DKMS-Minimum) as apt enforces it. In an
# overlay of a build root, Debian 12's dkms (3.0.10, older than the floor: it ignores
# PRE_BUILD's exit status, so our 77 "skip" would not stop the build) replaces the
# root's own, the root's archive lists are taken away (as on Debian 12, nothing newer
# can be installed), and `apt-get install ./rxe-kvfix-dkms_*.deb` must be refused with
# apt's unmet-dependency line naming dkms (>= FLOOR), exit non-zero, leave nothing
# half-installed and every kernel with its stock rdma_rxe. Stage "floor" of
# tests/pkg/run; about 15 s (the .deb of dkms downloaded once, then cached).
#
#   dkms-floor.sh --deb FILE [--root ROOT]
#
# --deb FILE   rxe-kvfix-dkms_*_all.deb to install
# --root ROOT  the build root to overlay (vmhost/mkroot's name; default sid)
# dkms 3.0.10 comes from the mirror the host's apt uses (rxe_apt_mirror), at its
# pool path, checked against the SHA256 bookworm's Packages index gives it (and
# against the host's own index when it has that version); cached in
# <cache>/dkms-floor.
# Results: testlib lines, suite pkg; TSV appended to $RXE_RESULTS.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RXE_PROG='pkg-floor'
export RXE_PROG
# shellcheck source=vmhost/lib.sh
. "$REPO/vmhost/lib.sh"
# shellcheck source=tests/testlib.sh
. "$REPO/tests/testlib.sh"
# shellcheck source=kmod/rxe-kvfix-lib.sh
. "$REPO/kmod/rxe-kvfix-lib.sh"
t_suite pkg

# Debian 12's dkms: version, pool path (relative to the mirror) and the SHA256 of
# bookworm's Packages index
OLD_VER=3.0.10-8+deb12u1
OLD_POOL=pool/main/d/dkms/dkms_3.0.10-8+deb12u1_all.deb
OLD_SHA256=12da620048a926afa72f1f46f3477fb9ad3d2a6b3446da56cc43fe1a413b6944

usage() { sed -n '/^#   dkms-floor.sh --deb/,/^# Results/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
DEB='' ROOT=sid
while (($#)); do
	case $1 in
	--deb)
		[[ -f ${2:-} ]] || {
			echo "dkms-floor.sh: --deb needs the rxe-kvfix-dkms .deb file" >&2
			exit 2
		}
		DEB=$(realpath "$2")
		shift 2
		;;
	--root)
		[[ -n ${2:-} ]] || {
			echo "dkms-floor.sh: --root needs a build root name (vmhost/kernels.tsv's third column)" >&2
			exit 2
		}
		ROOT=$2
		shift 2
		;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		echo "dkms-floor.sh: unknown argument '$1' (try --help)" >&2
		exit 2
		;;
	esac
done
[[ -n $DEB ]] || {
	usage >&2
	exit 2
}
[[ $(id -u) == 0 ]] || {
	echo "dkms-floor.sh: needs root (chroot, overlay mounts)" >&2
	exit 2
}
FLOOR=$(rxe_kvfix_meta DKMS-Minimum "$REPO/META")
mapfile -t KERNELS < <(rxe_matrix_lines "$ROOT" | awk '{print $1}')
((${#KERNELS[@]})) || {
	echo "dkms-floor.sh: vmhost/kernels.tsv has no kernel in the root '$ROOT'" >&2
	exit 2
}

MNT='' WORK=$(mktemp -d /var/tmp/rxe-kvfix-floor.XXXXXX)
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	if [[ -n $MNT ]] && mountpoint -q "$MNT"; then rxe_overlay_umount "$MNT"; fi
	rm -rf --one-file-system "$WORK"
}
rxe_on_exit cleanup
T0=$SECONDS
echo "--- the DKMS floor: rxe-kvfix-dkms on Debian 12's dkms $OLD_VER in the $ROOT root (floor: dkms >= $FLOOR, META's DKMS-Minimum)"

# --- dkms 3.0.10, downloaded once into the cache, checked by its SHA256
t_start "floor: Debian 12's dkms $OLD_VER, SHA256 as bookworm's Packages index says"
cache=$(rxe_cache_dir)/dkms-floor
old=$cache/${OLD_POOL##*/}
why=''
if [[ ! -s $old ]]; then
	mkdir -p "$cache"
	if mirror=$(rxe_apt_mirror) && curl -fsSL --retry 2 -o "$old.part" "${mirror%/}/$OLD_POOL"; then
		mv "$old.part" "$old"
	else
		rm -f "$old.part"
		why="download of $OLD_POOL from the host's apt mirror failed"
	fi
fi
if [[ -z $why ]]; then
	sum=$(sha256sum <"$old" | awk '{print $1}')
	# the host's own index, when it lists this version (a Debian 12 host)
	idx=$(apt-cache show "dkms=$OLD_VER" 2>/dev/null | sed -n 's/^SHA256: //p' | head -n1) || true
	if [[ $sum != "$OLD_SHA256" ]]; then
		why="$old has SHA256 $sum, bookworm's index says $OLD_SHA256; removed, run again"
		rm -f "$old"
	elif [[ -n $idx && $idx != "$sum" ]]; then
		why="the host's apt index says SHA256 $idx for dkms $OLD_VER, the file has $sum"
	fi
fi
if [[ -n $why ]]; then
	t_fail "$why"
	exit 1
fi
t_pass

# --- the root, with that dkms and without its archive lists
t_start "floor: build root $ROOT with dkms $OLD_VER in place of its own"
lower=$("$REPO/vmhost/mkroot" "$ROOT" | tail -n1)
MNT=$WORK/mnt
rxe_overlay_mount "$lower" "$MNT"
mkdir -p "$MNT/root/floor"
cp "$old" "$DEB" "$MNT/root/floor/"
# installed with the root's apt, before its lists go: dkms 3.0.10 pre-depends on
# lsb-release (and depends on gcc | c-compiler), which the roots may lack; those
# come from the root's own archive, kept in the cache for the next run
lcache=$cache/$ROOT-archives
mkdir -p "$lcache"
cp "$lcache"/*.deb "$MNT/var/cache/apt/archives/" 2>/dev/null || true
# shellcheck disable=SC2016 # dpkg-query's format
if out=$(rxe_chroot_run "$MNT" apt-get install -y --no-install-recommends --allow-downgrades "/root/floor/${old##*/}" 2>&1) &&
	[[ $(rxe_chroot_run "$MNT" dpkg-query -W -f '${Version}' dkms) == "$OLD_VER" ]]; then
	find "$MNT/var/cache/apt/archives" -maxdepth 1 -name '*.deb' -exec cp -t "$lcache/" {} +
	t_pass
else
	t_fail "$(tail -n 3 <<<"$out" | tr '\n' ' ' | cut -c1-400)"
	exit 1
fi
# as on Debian 12, no newer dkms can come: the root's archive is taken away
rm -f "$MNT/etc/apt/sources.list" "$MNT"/etc/apt/sources.list.d/*
find "$MNT/var/lib/apt/lists" -maxdepth 1 -type f ! -name lock -delete

# --- README's apt-get install of the package
deb=./${DEB##*/}
t_start "floor: apt-get install $deb with dkms $OLD_VER: refused, naming dkms (>= $FLOOR)"
rc=0
# shellcheck disable=SC2016 # expanded by the inner sh
out=$(rxe_chroot_run "$MNT" sh -c 'cd /root/floor && exec apt-get install -y --no-install-recommends "$1"' _ "$deb" 2>&1) || rc=$?
want="rxe-kvfix-dkms : Depends: dkms (>= $FLOOR) but $OLD_VER is to be installed"
line=$(grep -F -m1 'Depends: dkms' <<<"$out" | sed 's/^ *//') || true
if ((rc != 0)) && [[ $line == "$want" ]]; then
	t_pass
	echo "     apt: $line (exit $rc)"
else
	t_fail "exit $rc, dkms line '${line:-none}'; apt said: $(tail -n 3 <<<"$out" | tr '\n' ' ' | cut -c1-300)"
	grep -E 'Error|error|Running the pre_build|Building module|Bad return|exit' <<<"$out" | head -n 12 | sed 's/^/     apt: /'
fi

t_start "floor: after the refusal nothing of rxe-kvfix is installed or half-installed, each kernel's rdma_rxe is its own"
bad=''
# shellcheck disable=SC2016 # dpkg-query's format
st=$(rxe_chroot_run "$MNT" dpkg-query -W -f '${db:Status-Abbrev}' rxe-kvfix-dkms 2>/dev/null) || true
[[ -z $st || $st == un* || $st == pn* ]] || bad+=" dpkg-status=$st"
audit=$(rxe_chroot_run "$MNT" dpkg --audit 2>&1) || true
[[ -z $audit ]] || bad+=" dpkg-audit:$(head -n1 <<<"$audit")"
! compgen -G "$MNT/usr/src/rxe-kvfix-*" >/dev/null || bad+=" /usr/src/rxe-kvfix-*"
[[ ! -e $MNT/var/lib/dkms/rxe-kvfix ]] || bad+=" /var/lib/dkms/rxe-kvfix"
for k in "${KERNELS[@]}"; do
	p=$(rxe_chroot_run "$MNT" modinfo -k "$k" -n rdma_rxe 2>/dev/null) || true
	[[ $p == /lib/modules/$k/kernel/* || $p == /usr/lib/modules/$k/kernel/* ]] || bad+=" $k:${p:-none}"
done
if [[ -z $bad ]]; then t_pass; else t_fail "${bad# }"; fi
echo "--- the DKMS floor: $((SECONDS - T0)) s"
exit $((T_FAILS > 0))
