#!/usr/bin/env bash
# vmhost/lib.sh: the test host side's one library (sourced, not executed): the
# kernel matrix, the host's apt mirror, build roots, overlays, chroot mounts, kbuild
# through ccache. Sourced by vmhost's scripts and by everything that uses the test
# host (patches/validate-boot, tests/); it depends on nothing outside vmhost/.
#
# Functions (all prefixed rxe_):
#   rxe_log MSG...                 progress line on stderr
#   rxe_die CODE MSG...            one-line error on stderr, exit CODE
#   rxe_cache_dir                  ${RXE_CACHE:-/var/cache/rxe-kvfix} (the harness setting cache=)
#   rxe_matrix_file                vmhost/kernels.tsv of this checkout (test hook: $RXE_MATRIX)
#   rxe_matrix_lines [ROOT]        matrix rows (release suite root version expect), one
#                                  space-separated line each, comments removed
#   rxe_matrix_row REL             the row of kernel REL (exit 1 if absent)
#   rxe_matrix_role ROLE [ROOT]    releases whose roles column names ROLE (matrix order)
#   rxe_matrix_primary             the one kernel with role primary (exit 2 unless one)
#   rxe_package_version            rxe-kvfix's version (META of this checkout)
#   rxe_apt_mirror                 main archive URI from the host's apt configuration
#   rxe_apt_security_mirror        security archive URI (path ending in -security)
#   rxe_need_host CMD:PKG...       install missing host packages with apt-get (idempotent)
#   rxe_chroot_api_mount DIR       mount proc, sys, dev (rbind, rslave) under DIR
#   rxe_chroot_api_umount DIR      undo rxe_chroot_api_mount (reverse order, lazy fallback)
#   rxe_chroot_run DIR [VAR=VAL]... CMD...
#                                  CMD chrooted into DIR with a clean environment (PATH,
#                                  HOME=/root, LANG=C.UTF-8, DEBIAN_FRONTEND) plus VAR=VAL
#   rxe_overlay_mount [--no-api] LOWER MNT
#                                  overlayfs at MNT: lower=LOWER (read-only; A:B for
#                                  layer A over root B), upper/work in
#                                  a fresh temp dir; plus proc/sys/dev unless --no-api
#   rxe_overlay_umount MNT         unmount everything under MNT and delete the temp upper
#   rxe_mounted_under DIR          list mount points at or below DIR (deepest first)
#   rxe_copy_checkout ROOT         copy this checkout (no build output, no .git) to
#                                  ROOT/root/rxe-kvfix, as a user's clone would be
#
# shellcheck shell=bash

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$VM_DIR/.." && pwd)
# shellcheck source=vmhost/common.sh
. "$VM_DIR/common.sh"

rxe_log() { printf '%s: %s\n' "${RXE_PROG:-rxe-kvfix}" "$*" >&2; }

rxe_die() {
	local code=$1
	shift
	printf '%s: error: %s\n' "${RXE_PROG:-rxe-kvfix}" "$*" >&2
	exit "$code"
}

rxe_cache_dir() { printf '%s\n' "${RXE_CACHE:-/var/cache/rxe-kvfix}"; }

rxe_matrix_file() { printf '%s\n' "${RXE_MATRIX:-$REPO_DIR/vmhost/kernels.tsv}"; }

rxe_matrix_lines() {
	local root=${1:-} f
	f=$(rxe_matrix_file)
	[[ -r "$f" ]] || rxe_die 2 "kernel matrix $f not found; run from a checkout of rxe-kvfix"
	awk -v want="$root" '
		{ sub(/#.*/, "") }
		NF >= 5 { if (want == "" || $3 == want) print $1, $2, $3, $4, $5 }
	' "$f"
}

rxe_matrix_row() {
	local rel=$1
	rxe_matrix_lines "" | awk -v r="$rel" '$1 == r { print; found = 1 } END { exit !found }'
}

rxe_matrix_role() {
	local role=$1 root=${2:-}
	awk -v role="$role" -v want="$root" '
		{ sub(/#.*/, "") }
		NF >= 6 && (want == "" || $3 == want) && ("," $6 ",") ~ ("," role ",") { print $1 }
	' "$(rxe_matrix_file)"
}

rxe_matrix_primary() {
	local p
	mapfile -t p < <(rxe_matrix_role primary)
	((${#p[@]} == 1)) || rxe_die 2 "$(rxe_matrix_file) must give exactly one kernel the role 'primary' (it has ${#p[@]})"
	printf '%s\n' "${p[0]}"
}

rxe_package_version() {
	# shellcheck source=kmod/rxe-kvfix-lib.sh
	. "$REPO_DIR/kmod/rxe-kvfix-lib.sh"
	rxe_kvfix_meta_version "$REPO_DIR"
}

# All URIs of enabled deb sources on the host: deb822 "URIs:" lines and one-line
# "deb [opts] URI suite..." entries. Comments and "Enabled: no" stanzas are ignored.
# ETC: the apt configuration directory (/etc/apt; vmhost/selftest passes its own).
rxe__host_apt_uris() {
	local f etc=$1
	for f in "$etc"/sources.list.d/*.sources; do
		[[ -r "$f" ]] || continue
		awk '
			/^[[:space:]]*#/ { next }
			/^[[:space:]]*$/ { if (!off) for (i in u) print u[i]; delete u; off = 0; n = 0; next }
			tolower($1) == "enabled:" && tolower($2) == "no" { off = 1 }
			tolower($1) == "uris:" { for (i = 2; i <= NF; i++) u[n++] = $i }
			END { if (!off) for (i in u) print u[i] }
		' "$f"
	done
	for f in "$etc"/sources.list "$etc"/sources.list.d/*.list; do
		[[ -r "$f" ]] || continue
		awk '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
				if (i <= NF) print $i
			}
		' "$f"
	done
}

rxe_apt_mirror() {
	if [[ -n "${RXE_MIRROR:-}" ]]; then
		printf '%s\n' "$RXE_MIRROR"
		return
	fi
	local u
	u=$(rxe__host_apt_uris /etc/apt | sed 's:/*$::' | grep -E '^(https?|file):' | grep -v -- '-security$' | head -n1) || true
	[[ -n "$u" ]] || rxe_die 125 "no Debian mirror found in /etc/apt/sources.list{,.d/*.sources}; configure apt or set RXE_MIRROR (the harness setting mirror=)"
	printf '%s\n' "$u"
}

rxe_apt_security_mirror() {
	if [[ -n "${RXE_SECURITY_MIRROR:-}" ]]; then
		printf '%s\n' "$RXE_SECURITY_MIRROR"
		return
	fi
	local u
	u=$(rxe__host_apt_uris /etc/apt | sed 's:/*$::' | grep -E '^(https?|file):' | grep -- '-security$' | head -n1) || true
	[[ -n "$u" ]] || rxe_die 125 "no security archive URI (path ending in -security) in the host's apt configuration; add one or set RXE_SECURITY_MIRROR (the harness setting security_mirror=)"
	printf '%s\n' "$u"
}

# rxe_need_host CMD:PKG ... : for each CMD missing from PATH, apt-get install PKG.
rxe_need_host() {
	local spec cmd pkg missing=()
	for spec in "$@"; do
		cmd=${spec%%:*}
		pkg=${spec#*:}
		if ! command -v "$cmd" >/dev/null 2>&1 && [[ ! -e "$cmd" ]]; then
			missing+=("$pkg")
		fi
	done
	((${#missing[@]})) || return 0
	[[ $(id -u) -eq 0 ]] || rxe_die 125 "missing host packages: ${missing[*]}; install them (apt-get install ${missing[*]}) or run as root"
	rxe_log "installing host packages: ${missing[*]}"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
		apt-get update >&2 || true
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
			rxe_die 125 "apt-get install ${missing[*]} failed on the host; install them by hand"
	fi
}

# Mount points at or below DIR, deepest first.
rxe_mounted_under() {
	local dir
	dir=$(realpath -m "$1")
	awk -v d="$dir" '
		function unesc(s) { gsub(/\\040/, " ", s); gsub(/\\011/, "\t", s); gsub(/\\134/, "\\", s); return s }
		{ m = unesc($5); if (m == d || index(m, d "/") == 1) print length(m), m }
	' /proc/self/mountinfo | sort -rn -k1,1 | cut -d' ' -f2-
}

rxe_chroot_api_mount() {
	local dir=$1
	mount -t proc proc "$dir/proc"
	mount -t sysfs sysfs "$dir/sys"
	mount --rbind /dev "$dir/dev"
	mount --make-rslave "$dir/dev"
}

rxe_chroot_api_umount() {
	local dir=$1 m
	for m in dev sys proc; do
		if mountpoint -q "$dir/$m"; then
			umount -R "$dir/$m" 2>/dev/null || umount -R -l "$dir/$m" || true
		fi
	done
}

rxe_chroot_run() {
	local dir=$1
	shift
	chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive "$@"
}

rxe_overlay_mount() {
	local api=1
	if [[ "${1:-}" == --no-api ]]; then
		api=0
		shift
	fi
	local lower=$1 mnt=$2 tmpbase tmp l
	# LOWER may be several directories, uppermost first, separated by ':'
	for l in ${lower//:/ }; do
		[[ -d "$l" ]] || rxe_die 2 "overlay lower dir $l does not exist; build it with vmhost/mkroot"
	done
	[[ -d "$mnt" ]] || mkdir -p "$mnt"
	if mountpoint -q "$mnt"; then
		rxe_die 2 "$mnt is already a mount point; unmount it first (vmhost/overlay umount $mnt)"
	fi
	tmpbase=${RXE_OVERLAY_TMP:-${TMPDIR:-/var/tmp}}
	tmp=$(mktemp -d "$tmpbase/rxe-kvfix-ovl.XXXXXXXX")
	mkdir "$tmp/upper" "$tmp/work"
	if ! mount -t overlay overlay -o "lowerdir=$lower,upperdir=$tmp/upper,workdir=$tmp/work" "$mnt"; then
		rm -rf "$tmp"
		rxe_die 125 "mounting overlayfs on $mnt failed (is the overlay module available? modprobe overlay)"
	fi
	if ((api)); then
		rxe_chroot_api_mount "$mnt"
	fi
}

rxe_overlay_umount() {
	local mnt upper tmp m
	mnt=$(realpath -m "$1")
	# find our temp dir from the overlay's upperdir= option before unmounting
	upper=$(findmnt -n -o OPTIONS --mountpoint "$mnt" 2>/dev/null | tr ',' '\n' | sed -n 's/^upperdir=//p' | head -n1) || true
	while read -r m; do
		[[ -n "$m" ]] || continue
		umount "$m" 2>/dev/null || umount -l "$m" || true
	done < <(rxe_mounted_under "$mnt")
	if [[ -n "$(rxe_mounted_under "$mnt")" ]]; then
		rxe_die 125 "could not unmount everything below $mnt; see findmnt -R $mnt"
	fi
	if [[ -n "$upper" ]]; then
		tmp=$(dirname "$upper")
		case "$(basename "$tmp")" in
		rxe-kvfix-ovl.*) rm -rf --one-file-system "$tmp" ;;
		esac
	fi
}

# rxe_kbuild_ccache_mount MNT: set KBUILD_ENV, the PATH (and CCACHE_DIR) a command
# chrooted into the root at MNT runs with (for `env -i`). When the setting ccache is
# 1 and the root has ccache (vmhost/mkroot installs it), <cache>/ccache-kbuild is
# bind-mounted at MNT/var/cache/rxe-kvfix-kbuild and kbuild's compiler (the headers'
# x86_64-linux-gnu-gcc-N, looked up on PATH by make) runs through ccache: PATH starts
# with /usr/lib/ccache for commands run directly, and because apt hands dpkg its own
# PATH (DPkg::Path) and rpm its scriptlets theirs (%_install_script_path), the overlay
# gets, for the time of the mount, an apt.conf.d file and an rpm macro file that put
# /usr/lib/ccache first there too, and /etc/ccache.conf naming the cache. The same
# source built against the same headers is then compiled once; modpost, the link, BTF
# and the signature run every time. rxe_kbuild_ccache_umount MNT removes the files and
# the mount (rxe_overlay_umount unmounts too); a root booted by vm-run must have had it.
# rxe_kbuild_ccache_clean DIR removes the files from DIR (a root or a copied upper layer).
KBUILD_ENV=()
KBUILD_CCACHE_FILES=(etc/ccache.conf etc/apt/apt.conf.d/99harness-kbuild-ccache etc/rpm/macros.harness-kbuild-ccache)
# shellcheck disable=SC2034  # read by the callers
rxe_kbuild_ccache_mount() {
	local mnt=$1 dir=/var/cache/rxe-kvfix-kbuild path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	KBUILD_ENV=("PATH=$path")
	[[ ${RXE_CCACHE:-1} == 1 && -x $mnt/usr/bin/ccache && -d $mnt/usr/lib/ccache ]] || return 0
	mkdir -p "$(rxe_cache_dir)/ccache-kbuild" "$mnt$dir" "$mnt/etc/apt/apt.conf.d" "$mnt/etc/rpm"
	mountpoint -q "$mnt$dir" || mount --bind "$(rxe_cache_dir)/ccache-kbuild" "$mnt$dir"
	printf '# test harness only (rxe_kbuild_ccache_mount)\ncache_dir = %s\n' "$dir" >"$mnt/etc/ccache.conf"
	printf '// test harness only (rxe_kbuild_ccache_mount)\nDPkg::Path "/usr/lib/ccache:/usr/sbin:/usr/bin:/sbin:/bin";\n' \
		>"$mnt/etc/apt/apt.conf.d/99harness-kbuild-ccache"
	printf '# test harness only (rxe_kbuild_ccache_mount)\n%%_install_script_path /usr/lib/ccache:/sbin:/bin:/usr/sbin:/usr/bin\n' \
		>"$mnt/etc/rpm/macros.harness-kbuild-ccache"
	KBUILD_ENV=("PATH=/usr/lib/ccache:$path" "CCACHE_DIR=$dir")
}
rxe_kbuild_ccache_clean() {
	local f
	for f in "${KBUILD_CCACHE_FILES[@]}"; do rm -f "${1:?}/$f"; done
	rmdir "$1/etc/rpm" "$1/var/cache/rxe-kvfix-kbuild" 2>/dev/null || true
}
rxe_kbuild_ccache_umount() {
	local m=$1/var/cache/rxe-kvfix-kbuild
	if mountpoint -q "$m"; then umount "$m" 2>/dev/null || umount -l "$m" || true; fi
	rxe_kbuild_ccache_clean "$1"
}

# The file list is made first and tar copies exactly it (--no-recursion): make check's
# other stages create and remove their build directories beside the sources
# (build-sanitize, build-fuzz, build-tidy, ...) while a VM stage copies the checkout:
# tar reading "." itself then ends in "file changed as we read it", exit 1, and find
# over "." in "No such file or directory"; so the top level is listed by the shell
# and only the kept entries are walked.
rxe_copy_checkout() {
	mkdir -p "$1/root/rxe-kvfix"
	(
		cd "$REPO_DIR" || exit
		for e in .[!.]* *; do
			case $e in .git | build | build-* | _build | results) continue ;; esac
			[[ -e $e || -L $e ]] || continue
			find "$e" \( -type f -o -type l \) -print0
		done
	) |
		tar -C "$REPO_DIR" --null --no-recursion -T - -cf - | tar -C "$1/root/rxe-kvfix" -xf -
}
