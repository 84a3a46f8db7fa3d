#!/usr/bin/env bash
# fedora-shape.sh: turn an overlay of the sid build root into a Fedora-shaped
# root (simulated: Debian kernel, DKMS's Fedora code path, Fedora's file layout).
# Nothing of Fedora itself is here: no Fedora kernel, no dnf, no Fedora rpmdb.
# What is made Fedora's:
#   - /etc/os-release and /usr/lib/os-release say ID=fedora VERSION_ID=44, so
#     DKMS takes its Fedora branch (/extra, the in-tree module archived);
#   - no Debian kernel source: linux-source-X.Y purged, the cached
#     linux-source tarballs removed, so the SRPM provider is the only one;
#   - each kernel's build tree where kernel-devel puts it: one merged tree
#     /usr/src/kernels/REL (Debian's -common and -amd64 halves joined), with
#     /lib/modules/REL/build and source pointing there;
#   - a kernel source RPM per kernel, made here with rpmbuild in Fedora's shape
#     (kernel.spec, Source0 linux-X.Y.Z.tar.xz, patch-X.Y-redhat.patch) from
#     Debian's linux-source of the same upstream version, trimmed to the top
#     Makefile and drivers/infiniband/sw/rxe (all the provider reads; repacking
#     the whole 1.4 GB tree costs minutes), in /var/cache/rxe-kvfix/sources/
#     where README tells Fedora users to put `dnf download --source kernel-...`;
#   - Fedora's dkms kernel-install plugin (40-dkms.install runs
#     `dkms kernel_postinst --kernelver REL`, as Fedora's dkms package ships it;
#     Debian's calls /etc/kernel/postinst.d/dkms instead);
#   - Fedora's DKMS configuration (simulated: written to do what Fedora's dkms package
#     does, docs/lifecycle.md): its %install edits framework.conf to
#     modprobe_on_install="true" and post_transaction="dracut --regenerate-all --force";
#     dkms.service (upstream's: `dkms autoinstall --kernelver %v` at boot) installed,
#     enabled with --dkms-service; /usr/bin/dracut a counting stand-in (no dracut in the build roots): each
#     call appends one line to /var/log/rxe-kvfix-dracut-calls.log and exits 0; what is
#     measured is how often DKMS and our scripts call it, not dracut;
#   - Fedora's systemd packaging policy (tests/pkg/fedora-shaped/, written for these
#     tests after reading systemd's sources): the preset policy ending in `disable *`
#     (99-default-disable.preset), /usr/lib/systemd/systemd-update-helper, which
#     Fedora's %systemd_post/%systemd_preun call, and the RPM macros themselves in
#     /usr/lib/rpm/macros.d/macros.systemd (the RPMs the tests install are built
#     with the same file: packaging/build-rpm --macros).
#
#   fedora-shape.sh [--stage REL]... [--unaffected TRIXIE_ROOT:REL] [--no-srpm] [--dkms-service] MNT
#
# --stage REL     REL's build tree is kept aside in /var/lib/rxe-kvfix-fedora-shape/
#                 kernel-devel/REL (kernel-devel not yet installed); the upgrade step
#                 moves it in place and runs kernel-install add (fedora-devel-install)
# --unaffected T:REL  also give the root kernel REL from build root T (the trixie
#                 root's 6.12.113, which does not need the fix): its build tree, kbuild
#                 tools, the modules rdma_rxe needs and a source RPM of its source
# --no-srpm       make no source RPMs (the negative case)
# --dkms-service  dkms.service enabled (multi-user.target), as on a Fedora host whose
#                 dkms runs it at boot (whether Fedora's preset list enables it was not
#                 verified); without, installed only
# MNT must be an overlay of the sid root with proc/sys/dev mounted; run as root.
set -euo pipefail

usage() { sed -n '/^#   fedora-shape.sh/,/^# MNT must/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
# shellcheck source=vmhost/lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/vmhost/lib.sh"
# shellcheck source=tests/testlib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/testlib.sh"
readonly LABEL="Fedora-shaped (simulated: Debian kernel, DKMS's Fedora code path, Fedora's file layout)"

STAGE=() UNAFF='' SRPMS=1 MNT='' DKMS_SERVICE=0
while (($#)); do
	case $1 in
	--stage)
		[[ $# -ge 2 ]] || {
			echo "fedora-shape: --stage needs a kernel release" >&2
			exit 2
		}
		STAGE+=("$2")
		shift 2
		;;
	--unaffected)
		[[ ${2:-} == *:* ]] || {
			echo "fedora-shape: --unaffected needs ROOTDIR:RELEASE" >&2
			exit 2
		}
		UNAFF=$2
		shift 2
		;;
	--no-srpm)
		SRPMS=0
		shift
		;;
	--dkms-service)
		DKMS_SERVICE=1
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	-*)
		echo "fedora-shape: unknown option '$1' (try --help)" >&2
		exit 2
		;;
	*)
		[[ -z $MNT ]] || {
			echo "fedora-shape: one MNT only (try --help)" >&2
			exit 2
		}
		MNT=$1
		shift
		;;
	esac
done
[[ -n $MNT && -d $MNT/usr/src ]] || {
	echo "fedora-shape: MNT must be an overlay of the sid root (try --help)" >&2
	exit 2
}
command -v rpmbuild >/dev/null || {
	echo "fedora-shape: rpmbuild is missing on the host (tests/host-deps)" >&2
	exit 1
}
in_mnt() { rxe_chroot_run "$MNT" "$@"; }

W=$(mktemp -d /var/tmp/rxe-kvfix-fedora-shape.XXXXXX)
cleanup() { rm -rf "$W"; }
rxe_on_exit cleanup
STATE=$MNT/var/lib/rxe-kvfix-fedora-shape
mkdir -p "$STATE/kernel-devel"

# the kernels of the root: every /lib/modules/REL with a Debian build tree
mapfile -t KERNELS < <(cd "$MNT/lib/modules" && for d in *; do [[ -d $MNT/usr/src/linux-headers-$d ]] && echo "$d"; done | sort -V)
((${#KERNELS[@]})) || {
	echo "fedora-shape: no kernel build trees in $MNT/usr/src" >&2
	exit 1
}

# make_srpm SOURCE_TARBALL UPSTREAM: kernel-UPSTREAM-200.fc44.src.rpm in the root's
# cache; made once per source tarball (its name, size and time: decompressing
# it is most of the cost) and the code that makes it (this function, t_fedora_srpm
# and the label), kept in $SRPM_CACHE
SRPM_CACHE=${RXE_CACHE:-/var/cache/rxe-kvfix}/fedora-shaped-srpms
make_srpm() {
	local src=$1 up=$2 d key
	key="$(basename "$src") $(stat -c '%s %Y' "$src") $(declare -f make_srpm t_fedora_srpm | sha256sum) $LABEL"
	key=$(sha256sum <<<"$key" | cut -c1-12)
	mkdir -p "$MNT/var/cache/rxe-kvfix/sources"
	if compgen -G "$SRPM_CACHE/$key/kernel-$up-200.fc44*.src.rpm" >/dev/null; then
		cp "$SRPM_CACHE/$key/kernel-$up-200.fc44"*.src.rpm "$MNT/var/cache/rxe-kvfix/sources/"
		return 0
	fi
	d=$W/srpm-$up
	t_fedora_srpm "$src" "$up" "$d" 'fedora-shaped-distro-change: applied by rxe-kvfix-prepare' \
		fedora-shaped "$LABEL kernel source package" >/dev/null || {
		echo "fedora-shape: $(tail -n1 "$d/rpmbuild.log" 2>/dev/null)" >&2
		return 1
	}
	cp "$d"/rpm/SRPMS/kernel-"$up"-200.fc44*.src.rpm "$MNT/var/cache/rxe-kvfix/sources/"
	mkdir -p "$SRPM_CACHE/$key.part" && cp "$d"/rpm/SRPMS/kernel-"$up"-200.fc44*.src.rpm "$SRPM_CACHE/$key.part/" &&
		rm -rf "${SRPM_CACHE:?}/$key" && mv "$SRPM_CACHE/$key.part" "$SRPM_CACHE/$key"
}

# debian_source REL: Debian's linux-source tarball of kernel REL in the root
debian_source() {
	local rel=$1 xy ver t
	xy=$(cut -d. -f1,2 <<<"${rel%%+*}")
	ver=$(dpkg-query --admindir="$MNT/var/lib/dpkg" -W -f '${Version}' "linux-headers-$rel" 2>/dev/null)
	for t in "$MNT/var/cache/rxe-kvfix/sources/linux-source-${xy}_$ver.tar.xz" "$MNT/usr/src/linux-source-$xy.tar.xz"; do
		[[ -f $t ]] || continue
		[[ $t != */usr/src/* ]] || [[ $(dpkg-query --admindir="$MNT/var/lib/dpkg" -W -f '${Version}' "linux-source-$xy" 2>/dev/null) == "$ver" ]] || continue
		realpath "$t"
		return 0
	done
	return 1
}

# 1. source RPMs, from Debian's sources while the root still has them
if ((SRPMS)); then
	pids=()
	for k in "${KERNELS[@]}"; do
		src=$(debian_source "$k") || {
			echo "fedora-shape: no Debian linux-source of $k in the root" >&2
			exit 1
		}
		# a symlink into the root resolves on the host through MNT
		[[ -f $src ]] || src=$MNT$(readlink "$src")
		make_srpm "$src" "${k%%+*}" &
		pids+=($!)
	done
	if [[ -n $UNAFF ]]; then
		troot=${UNAFF%%:*} urel=${UNAFF#*:}
		uxy=$(cut -d. -f1,2 <<<"${urel%%+*}")
		uver=$(dpkg-query --admindir="$troot/var/lib/dpkg" -W -f '${Version}' "linux-headers-$urel")
		make_srpm "$troot/var/cache/rxe-kvfix/sources/linux-source-${uxy}_$uver.tar.xz" "${urel%%+*}" &
		pids+=($!)
	fi
	for p in "${pids[@]}"; do wait "$p" || exit 1; done
fi

# 2. no Debian kernel source
mapfile -t srcpkgs < <(dpkg-query --admindir="$MNT/var/lib/dpkg" -W -f '${Package}\n' 'linux-source-*' 2>/dev/null || true)
((${#srcpkgs[@]} == 0)) || in_mnt dpkg --purge "${srcpkgs[@]}" >/dev/null
rm -f "$MNT"/var/cache/rxe-kvfix/sources/linux-source-* "$MNT"/var/cache/rxe-kvfix/sources/linux-[0-9]*.tar.* "$MNT"/usr/src/linux-source-*

# 3. kernel-devel's layout: /usr/src/kernels/REL, one merged tree
fedora_tree() { # SRCROOT REL DEST: Debian's two halves of REL from SRCROOT joined in DEST
	local r=$1 rel=$2 dest=$3 kb common
	kb=$(readlink "$r/usr/src/linux-headers-$rel/scripts")
	kb=${kb#../../}
	kb=/usr/${kb%/scripts}
	common=$(sed -n 's|^include /usr/src/\(.*\)/Makefile$|\1|p' "$r/usr/src/linux-headers-$rel/Makefile")
	[[ -n $common && -d $r/usr/src/$common ]] || {
		echo "fedora-shape: $rel: unexpected Debian headers layout" >&2
		return 1
	}
	mkdir -p "$dest"
	cp -a "$r/usr/src/$common/." "$dest/"
	tar -C "$r/usr/src/linux-headers-$rel" --exclude=./Makefile --exclude=./scripts --exclude=./tools -cf - . | tar -C "$dest" -xf -
	rm -f "$dest/scripts" "$dest/tools"
	ln -s "$kb/scripts" "$dest/scripts"
	ln -s "$kb/tools" "$dest/tools"
}
for k in "${KERNELS[@]}"; do
	if [[ " ${STAGE[*]} " == *" $k "* ]]; then dest=$STATE/kernel-devel/$k; else dest=$MNT/usr/src/kernels/$k; fi
	fedora_tree "$MNT" "$k" "$dest"
	rm -rf "$MNT/usr/src/linux-headers-$k" "$MNT/usr/src/linux-headers-${k%-amd64}-common"
	rm -f "$MNT/lib/modules/$k/build" "$MNT/lib/modules/$k/source"
	if [[ $dest == "$MNT"/usr/src/kernels/* ]]; then
		ln -s "/usr/src/kernels/$k" "$MNT/lib/modules/$k/build"
		ln -s "/usr/src/kernels/$k" "$MNT/lib/modules/$k/source"
	fi
done

# 4. the unaffected kernel from another build root: its tree, kbuild tools, and
# the modules that rdma_rxe needs (modinfo and modprobe resolve it like a kernel's)
if [[ -n $UNAFF ]]; then
	troot=${UNAFF%%:*} urel=${UNAFF#*:}
	fedora_tree "$troot" "$urel" "$MNT/usr/src/kernels/$urel"
	kb=$(readlink "$MNT/usr/src/kernels/$urel/scripts")
	mkdir -p "$MNT${kb%/scripts}"
	cp -a "$troot${kb%/scripts}/." "$MNT${kb%/scripts}/"
	mkdir -p "$MNT/lib/modules/$urel"
	cp -a "$troot/lib/modules/$urel"/modules.* "$MNT/lib/modules/$urel/"
	cp -a "$troot/boot/config-$urel" "$MNT/boot/" 2>/dev/null || true
	while read -r _ ko; do
		mkdir -p "$MNT$(dirname "$ko")"
		cp -a "$troot$ko" "$MNT$ko"
	done < <(chroot "$troot" /sbin/modprobe -S "$urel" --show-depends rdma_rxe | awk '$1 == "insmod" {print $1, $2}')
	ln -s "/usr/src/kernels/$urel" "$MNT/lib/modules/$urel/build"
	ln -s "/usr/src/kernels/$urel" "$MNT/lib/modules/$urel/source"
fi

# 5. Fedora's os-release and dkms kernel-install plugin
rm -f "$MNT/etc/os-release"
cat >"$MNT/usr/lib/os-release" <<EOF
NAME="Fedora Linux"
VERSION="44 ($LABEL)"
ID=fedora
VERSION_ID=44
PLATFORM_ID="platform:f44"
PRETTY_NAME="Fedora Linux 44, $LABEL"
EOF
cp "$MNT/usr/lib/os-release" "$MNT/etc/os-release"
cat >"$MNT/usr/lib/kernel/install.d/40-dkms.install" <<'EOF'
#!/bin/bash
# Fedora-shaped: what Fedora's dkms package ships as this plugin does
case "$1" in
add) dkms kernel_postinst --kernelver "$2" ;;
remove) dkms kernel_prerm --kernelver "$2" ;;
esac
EOF
chmod 0755 "$MNT/usr/lib/kernel/install.d/40-dkms.install"
FS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/fedora-shaped
install -D -m 0644 "$FS/99-default-disable.preset" "$MNT/usr/lib/systemd/system-preset/99-default-disable.preset"
install -D -m 0755 "$FS/systemd-update-helper" "$MNT/usr/lib/systemd/systemd-update-helper"
install -D -m 0644 "$FS/macros.systemd" "$MNT/usr/lib/rpm/macros.d/macros.systemd"
# 6. Fedora's DKMS configuration, simulated (see the top): framework.conf as Fedora's
# dkms.spec leaves it, dkms.service (enabled with --dkms-service), dracut a counting stand-in
sed -i -e 's/^# *modprobe_on_install=.*/modprobe_on_install="true"/' \
	-e 's/^# *post_transaction=.*/post_transaction="dracut --regenerate-all --force"/' "$MNT/etc/dkms/framework.conf"
if ! grep -q '^post_transaction="dracut --regenerate-all --force"$' "$MNT/etc/dkms/framework.conf" ||
	! grep -q '^modprobe_on_install="true"$' "$MNT/etc/dkms/framework.conf"; then
	echo "fedora-shape: the root's /etc/dkms/framework.conf has no post_transaction/modprobe_on_install lines to set" >&2
	exit 1
fi
cat >"$MNT/usr/lib/systemd/system/dkms.service" <<EOF
# $LABEL: DKMS's boot unit, written to do what upstream's dkms.service.in does
[Unit]
Description=DKMS: modules built and installed for the booted kernel (simulated)
Before=network-pre.target graphical.target

[Service]
Type=oneshot
RemainAfterExit=true
ExecStart=/usr/sbin/dkms autoinstall --verbose --kernelver %v

[Install]
WantedBy=multi-user.target
EOF
if ((DKMS_SERVICE)); then
	mkdir -p "$MNT/etc/systemd/system/multi-user.target.wants"
	ln -sfn /usr/lib/systemd/system/dkms.service "$MNT/etc/systemd/system/multi-user.target.wants/dkms.service"
fi
cat >"$MNT/usr/bin/dracut" <<'EOF'
#!/bin/sh
# Fedora-shaped (simulated): a counting stand-in for dracut, not dracut. One line per
# call (time, arguments) in /var/log/rxe-kvfix-dracut-calls.log; no initramfs is made.
printf '%s %s\n' "$(date +%s.%N)" "$*" >>/var/log/rxe-kvfix-dracut-calls.log
EOF
chmod 0755 "$MNT/usr/bin/dracut"
printf '%s\n' "$LABEL" >"$STATE/label"
printf 'kernels=%s staged=%s unaffected=%s srpms=%s\n' "${KERNELS[*]}" "${STAGE[*]}" "${UNAFF#*:}" \
	"$(find "$MNT/var/cache/rxe-kvfix/sources" -name 'kernel-*.src.rpm' -printf '%f ' 2>/dev/null)" | tee "$STATE/made"
