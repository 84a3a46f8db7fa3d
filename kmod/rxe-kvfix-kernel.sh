# shellcheck shell=bash
# rxe-kvfix-kernel.sh: kernel identity, the one place where a kernel release is read.
# Sourced (by kmod/rxe-kvfix-lib.sh, so by every script that sources that), never run.
#
#   rxe_kvfix_is_release STRING   STRING has the form of a kernel release (uname -r)
#   rxe_kvfix_kernel RELEASE      sets, for that kernel:
#     KERNEL_RELEASE   RELEASE itself
#     KERNEL_UPSTREAM  the upstream version X.Y.Z (7.2.13+deb14-amd64 -> 7.2.13,
#                      7.1.10-200.fc44.x86_64 -> 7.1.10, 7.3.0-rc7 -> 7.3.0, 7.4 -> 7.4.0).
#                      Ubuntu's release says X.Y.0 whatever stable update the kernel is
#                      (7.0.0-15-generic can be Linux 7.0.14: ubuntu.com/kernel), so on
#                      Ubuntu it is read from the kernel's headers (the top Makefile of
#                      MODULES/RELEASE/build), else from /proc/version_signature when
#                      RELEASE is running ("Ubuntu 7.0.0-15.15-generic 7.0.14"), else
#                      left at X.Y.0 with KERNEL_UPSTREAM_EXACT=0
#     KERNEL_UPSTREAM_EXACT  1: KERNEL_UPSTREAM is the exact version of the kernel's
#                      source; 0: only its series is known (a source is then checked by
#                      its series and its package version)
#     KERNEL_SERIES    X.Y
#     KERNEL_DEBVER    the Debian package version of the installed kernel (the first
#                      installed of linux-headers-, linux-modules-, linux-binary-,
#                      linux-image-unsigned-RELEASE, linux-image-RELEASE-unsigned and
#                      linux-image-RELEASE), empty when no Debian package installed it
#     KERNEL_SRCPKG    the source package that built that package (dpkg's
#                      source:Package): linux on Debian and for Ubuntu's GA kernels,
#                      linux-hwe-7.0 for an Ubuntu HWE kernel; empty without a package
#     KERNEL_SRCBIN    the binary package that holds the kernel's source tarball:
#                      linux-source-X.Y on Debian, linux-source-X.Y.Z of the release on
#                      Ubuntu (linux-source-7.0.0; HWE source packages since 6.8 build
#                      none, and the source package is fetched instead)
#     KERNEL_SRCTAR    where that package puts the tarball, without the compression
#                      suffix: /usr/src/linux-source-X.Y.tar on Debian,
#                      /usr/src/linux-source-X.Y.Z/linux-source-X.Y.Z.tar on Ubuntu
#     KERNEL_NVR       Fedora's N-V-R (7.1.10-200.fc44 for 7.1.10-200.fc44.x86_64 and
#                      its +debug flavour); for a release not of that form the upstream
#                      version (dnf download --srpm kernel-7.2.13 takes the newest 7.2.13)
#     KERNEL_FAMILY    fedora (os-release names Fedora or a relative: the source RPM
#                      is its source), ubuntu (os-release names Ubuntu or a relative,
#                      and a Debian package installed the kernel), debian (a Debian
#                      package installed it), other
#     KERNEL_PKGVER    the version the source of this kernel is known by: KERNEL_NVR on
#                      a Fedora-like host, else KERNEL_DEBVER. What the fetch records in
#                      a kept source's .provenance (version=), and what tells that two
#                      installed flavours share one source.
#   rxe_kvfix_fedora_like         /etc/os-release (RXE_KVFIX_OS_RELEASE for tests)
#                                 names Fedora or a relative (ID or ID_LIKE)
#   rxe_kvfix_ubuntu_like         ... names Ubuntu or a relative
#   rxe_kvfix_installed_kernels   the installed kernels' releases, one per line
#                                 (MODULES/RELEASE/kernel exists; sorted by version)
# MODULES is /lib/modules (RXE_KVFIX_MODULES_DIR for tests).

KVFIX_RELEASE_RE='^[0-9]+\.[0-9]+[A-Za-z0-9.+_~-]*$'
# Fedora's kernel release: N-V-R.ARCH[+FLAVOUR]
KVFIX_NVR_RE='^([0-9][^-]*-[^-]+)\.(x86_64|aarch64|ppc64le|s390x|i686)(\+.*)?$'

rxe_kvfix_is_release() { [[ $1 =~ $KVFIX_RELEASE_RE && $1 != */* ]]; }

# rxe_kvfix_os_ids: os-release's ID and ID_LIKE words, space-separated and padded
rxe_kvfix_os_ids() {
	local f=${RXE_KVFIX_OS_RELEASE:-/etc/os-release}
	[[ -r $f ]] || return 0
	printf ' %s %s \n' "$(sed -n 's/^ID=//p' "$f" | tr -d '"')" "$(sed -n 's/^ID_LIKE=//p' "$f" | tr -d '"')"
}
rxe_kvfix_fedora_like() {
	local ids
	ids=$(rxe_kvfix_os_ids)
	[[ $ids == *" fedora "* || $ids == *" rhel "* ]]
}
rxe_kvfix_ubuntu_like() { [[ $(rxe_kvfix_os_ids) == *" ubuntu "* ]]; }

# rxe_kvfix_deb_package RELEASE: "VERSION SOURCE" of the kernel's first installed
# package (see KERNEL_DEBVER, KERNEL_SRCPKG); nothing when no package installed it.
# Installed is any state dpkg has a kernel in while it is there: wanted installed or
# held (apt-mark hold: h), and installed, unpacked, half-configured (its own hooks run
# while it is: U, F) or awaiting or pending triggers (W, t); not removed with its
# configuration kept (rc), half-installed (H) or not installed
rxe_kvfix_deb_package() {
	local k=$1 p out st name ver src
	command -v dpkg-query >/dev/null || return 0
	# the signed image last: its source package (linux-signed*) holds no kernel source
	local pkgs=("linux-headers-$k" "linux-modules-$k" "linux-binary-$k" "linux-image-unsigned-$k"
		"linux-image-$k-unsigned" "linux-image-$k")
	# one dpkg-query for all (it lists them sorted by name), then the first
	# installed one in the order above
	# (LC_ALL=C: sourced by callers that do not set it; the fields are read)
	out=$(LC_ALL=C dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version} ${source:Package}\n' "${pkgs[@]}" 2>/dev/null || true)
	for p in "${pkgs[@]}"; do
		while read -r st name ver src; do
			if [[ ${st:0:2} =~ ^[ih][iUFWt]$ && $name == "$p" ]]; then
				# a package without a Source field (a locally built one) names itself
				[[ $src != "$name" ]] || src=''
				printf '%s %s\n' "$ver" "$src"
				return 0
			fi
		done <<<"$out"
	done
}

# rxe_kvfix_ubuntu_upstream RELEASE: the upstream version of an Ubuntu kernel (see
# KERNEL_UPSTREAM), or nothing
rxe_kvfix_ubuntu_upstream() {
	local k=$1 mk=${RXE_KVFIX_MODULES_DIR:-/lib/modules}/$1/build v sig
	if [[ -r $mk/Makefile ]]; then
		v=$(rxe_kvfix_tree_version "$mk")
		v=${v%%-*}
		[[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] && printf '%s\n' "$v" && return 0
	fi
	if [[ $k == "$(uname -r)" && -r /proc/version_signature ]]; then
		read -r _ _ sig </proc/version_signature
		[[ $sig =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] && printf '%s\n' "$sig"
	fi
	return 0
}

# shellcheck disable=SC2034 # the KERNEL_* fields are read by the scripts that source this
rxe_kvfix_kernel() { # RELEASE
	local v
	KERNEL_RELEASE=$1
	KERNEL_UPSTREAM=$(sed -E 's/^([0-9]+\.[0-9]+(\.[0-9]+)?).*/\1/' <<<"$1")
	[[ $KERNEL_UPSTREAM == *.*.* ]] || KERNEL_UPSTREAM=$KERNEL_UPSTREAM.0
	KERNEL_UPSTREAM_EXACT=1
	KERNEL_SERIES=${KERNEL_UPSTREAM%.*}
	read -r KERNEL_DEBVER KERNEL_SRCPKG <<<"$(rxe_kvfix_deb_package "$1")" || true
	if [[ $1 =~ $KVFIX_NVR_RE ]]; then
		KERNEL_NVR=${BASH_REMATCH[1]}
	else
		KERNEL_NVR=$KERNEL_UPSTREAM
	fi
	KERNEL_SRCBIN=linux-source-$KERNEL_SERIES KERNEL_SRCTAR=/usr/src/linux-source-$KERNEL_SERIES.tar
	if rxe_kvfix_fedora_like; then
		KERNEL_FAMILY=fedora KERNEL_PKGVER=$KERNEL_NVR
	elif [[ -n $KERNEL_DEBVER ]] && rxe_kvfix_ubuntu_like; then
		KERNEL_FAMILY=ubuntu KERNEL_PKGVER=$KERNEL_DEBVER
		KERNEL_SRCBIN=linux-source-$KERNEL_UPSTREAM
		KERNEL_SRCTAR=/usr/src/$KERNEL_SRCBIN/$KERNEL_SRCBIN.tar
		v=$(rxe_kvfix_ubuntu_upstream "$1")
		if [[ -n $v && ${v%.*} == "$KERNEL_SERIES" ]]; then
			KERNEL_UPSTREAM=$v
		else
			KERNEL_UPSTREAM_EXACT=0
		fi
	elif [[ -n $KERNEL_DEBVER ]]; then
		KERNEL_FAMILY=debian KERNEL_PKGVER=$KERNEL_DEBVER
	else
		KERNEL_FAMILY=other KERNEL_PKGVER=''
	fi
}

rxe_kvfix_installed_kernels() {
	local d
	for d in "${RXE_KVFIX_MODULES_DIR:-/lib/modules}"/*/kernel; do
		[[ -d $d ]] || continue
		d=${d%/kernel}
		printf '%s\n' "${d##*/}"
	done | sort -V
}
