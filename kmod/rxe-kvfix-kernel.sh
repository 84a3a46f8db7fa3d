# shellcheck shell=bash
# rxe-kvfix-kernel.sh: kernel identity, the one place where a kernel release is read.
# Sourced (by kmod/rxe-kvfix-lib.sh, so by every script that sources that), never run.
#
#   rxe_kvfix_is_release STRING   STRING has the form of a kernel release (uname -r)
#   rxe_kvfix_kernel RELEASE      sets, for that kernel:
#     KERNEL_RELEASE   RELEASE itself
#     KERNEL_UPSTREAM  the upstream version X.Y.Z (7.2.13+deb14-amd64 -> 7.2.13,
#                      7.1.10-200.fc44.x86_64 -> 7.1.10, 7.3.0-rc7 -> 7.3.0, 7.4 -> 7.4.0)
#     KERNEL_SERIES    X.Y
#     KERNEL_DEBVER    the Debian package version of the installed kernel (the first
#                      installed of linux-headers-, linux-image-, linux-modules-,
#                      linux-binary-RELEASE and linux-image-RELEASE-unsigned), empty
#                      when no Debian package installed it
#     KERNEL_NVR       Fedora's N-V-R (7.1.10-200.fc44 for 7.1.10-200.fc44.x86_64 and
#                      its +debug flavour); for a release not of that form the upstream
#                      version (dnf download --srpm kernel-7.2.13 takes the newest 7.2.13)
#     KERNEL_FAMILY    fedora (os-release names Fedora or a relative: the source RPM
#                      is its source), debian (a Debian package installed it), other
#     KERNEL_PKGVER    the version the source of this kernel is known by: KERNEL_NVR on
#                      a Fedora-like host, else KERNEL_DEBVER. What the fetch records in
#                      a kept source's .provenance (version=), and what tells that two
#                      installed flavours share one source.
#   rxe_kvfix_fedora_like         /etc/os-release (RXE_KVFIX_OS_RELEASE for tests)
#                                 names Fedora or a relative (ID or ID_LIKE)
#   rxe_kvfix_installed_kernels   the installed kernels' releases, one per line
#                                 (/lib/modules/RELEASE/kernel exists; sorted by version)

KVFIX_RELEASE_RE='^[0-9]+\.[0-9]+[A-Za-z0-9.+_~-]*$'
# Fedora's kernel release: N-V-R.ARCH[+FLAVOUR]
KVFIX_NVR_RE='^([0-9][^-]*-[^-]+)\.(x86_64|aarch64|ppc64le|s390x|i686)(\+.*)?$'

rxe_kvfix_is_release() { [[ $1 =~ $KVFIX_RELEASE_RE && $1 != */* ]]; }

rxe_kvfix_fedora_like() {
	local f=${RXE_KVFIX_OS_RELEASE:-/etc/os-release} id='' like=''
	[[ -r $f ]] || return 1
	id=$(sed -n 's/^ID=//p' "$f" | tr -d '"')
	like=$(sed -n 's/^ID_LIKE=//p' "$f" | tr -d '"')
	[[ " $id $like " == *" fedora "* || " $id $like " == *" rhel "* ]]
}

# rxe_kvfix_deb_version RELEASE: see KERNEL_DEBVER
rxe_kvfix_deb_version() {
	local k=$1 p out st name ver
	command -v dpkg-query >/dev/null || return 0
	local pkgs=("linux-headers-$k" "linux-image-$k" "linux-modules-$k" "linux-binary-$k" "linux-image-$k-unsigned")
	# one dpkg-query for all (it lists them sorted by name), then the first
	# installed one in the order above
	out=$(dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\n' "${pkgs[@]}" 2>/dev/null || true)
	for p in "${pkgs[@]}"; do
		while read -r st name ver; do
			if [[ $st == ii && $name == "$p" ]]; then
				printf '%s\n' "$ver"
				return 0
			fi
		done <<<"$out"
	done
}

# shellcheck disable=SC2034 # the KERNEL_* fields are read by the scripts that source this
rxe_kvfix_kernel() { # RELEASE
	KERNEL_RELEASE=$1
	KERNEL_UPSTREAM=$(sed -E 's/^([0-9]+\.[0-9]+(\.[0-9]+)?).*/\1/' <<<"$1")
	[[ $KERNEL_UPSTREAM == *.*.* ]] || KERNEL_UPSTREAM=$KERNEL_UPSTREAM.0
	KERNEL_SERIES=${KERNEL_UPSTREAM%.*}
	KERNEL_DEBVER=$(rxe_kvfix_deb_version "$1")
	if [[ $1 =~ $KVFIX_NVR_RE ]]; then
		KERNEL_NVR=${BASH_REMATCH[1]}
	else
		KERNEL_NVR=$KERNEL_UPSTREAM
	fi
	if rxe_kvfix_fedora_like; then
		KERNEL_FAMILY=fedora KERNEL_PKGVER=$KERNEL_NVR
	elif [[ -n $KERNEL_DEBVER ]]; then
		KERNEL_FAMILY=debian KERNEL_PKGVER=$KERNEL_DEBVER
	else
		KERNEL_FAMILY=other KERNEL_PKGVER=''
	fi
}

rxe_kvfix_installed_kernels() {
	local d
	for d in /lib/modules/*/kernel; do
		[[ -d $d ]] || continue
		d=${d%/kernel}
		printf '%s\n' "${d##*/}"
	done | sort -V
}
