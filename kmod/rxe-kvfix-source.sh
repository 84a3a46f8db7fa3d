# shellcheck shell=bash
# rxe-kvfix-source.sh: acquiring the pristine rxe source of one kernel, for
# kmod/rxe-kvfix-prepare (sourced by it, after its options, configuration and kernel
# identity: KREL UPSTREAM SERIES_XY DEBVER SRCBIN KERNEL_* TREE CACHE SRPM FORCE FETCH
# FETCH_TIMEOUT ARCHIVE QUIET WORK HERE DRIVER_DIR CONF, and its say and die).
# find_source leaves the rxe directory in $WORK/rxe and sets PROVIDER, SOURCE_DESC and
# SOURCE_VERSION; it dies with one line (cause; remedy) when no provider has it, and
# exits 75 (EX_DEFER) when the source is to be fetched after the package transaction.
#
# Source providers, tried in this order (the first that has the exact
# source of the target kernel wins, and is reported by name):
#   tree     a kernel source tree given with --kernel-tree / RXE_KVFIX_KERNEL_TREE
#   debian   the tarball of the installed linux-source package (Debian's
#            /usr/src/linux-source-X.Y.tar.*, Ubuntu's
#            /usr/src/linux-source-X.Y.Z/linux-source-X.Y.Z.tar.bz2: KERNEL_SRCTAR)
#            whose version is the target kernel's package version
#   cache    a tarball in the cache directory (--cache / RXE_KVFIX_CACHE_DIR,
#            default /var/cache/rxe-kvfix/sources): Debian's
#            linux-source-X.Y_<debversion>.tar.* (Ubuntu's linux-source-X.Y.Z_...)
#            or upstream linux-X.Y.Z.tar.*
#   srpm     a Fedora kernel source RPM (--srpm FILE, or
#            kernel-<version>-<release>.src.rpm in the cache directory):
#            linux-<upstream>.tar.xz plus the distribution patch
#   fetch    the distribution that shipped the kernel, when none of the above has
#            it (fetch=auto in /etc/rxe-kvfix/rxe-kvfix.conf, the default): on
#            Debian, `apt-get download linux-source-X.Y=<the kernel's package
#            version>` (apt checks the .deb against the signed archive index; it
#            takes no apt or dpkg lock, so it works from a kernel hook). What the
#            build needs (the top Makefile and the rxe directory) is kept in the
#            cache as linux-source-X.Y_<version>.tar.xz, with a .provenance file;
#            the cache provider then takes it (kmod/rxe-kvfix-fetch, which also
#            knows the source archive). On Fedora, `dnf download --srpm`, never
#            inside a package transaction (a kernel-install plugin's run): there
#            the kernel hook starts rxe-kvfix-fetch@KERNELRELEASE.service.
#
#
# shellcheck disable=SC2034,SC2153 # PROVIDER, SOURCE_* are read by prepare, SRPM set by it
#
# Every failure of a provider is reported where it happens (die): a provider
# runs inside `if`, where the shell's errexit is off, so nothing in one may rely on it.

# --- providers -------------------------------------------------------------
# Each provider either extracts the pristine rxe directory into $WORK/rxe and
# sets PROVIDER/SOURCE_DESC/SOURCE_VERSION, or returns 1. A candidate of the
# wrong version is remembered in MISMATCH (and used only with --force).
PROVIDER='' SOURCE_DESC='' SOURCE_VERSION='' MISMATCH=''

# same_version_or_die VERSION WHAT REMEDY: the source is of the kernel's upstream
# version, or --force says to take it anyway; else one line: "WHAT VERSION, not ...".
# Where only the kernel's series is known (an Ubuntu release without its headers:
# KERNEL_UPSTREAM_EXACT=0), the series is compared; the package version says the rest.
same_version_or_die() {
	if [[ $KERNEL_UPSTREAM_EXACT == 0 ]]; then
		[[ ${1%.*} == "$SERIES_XY" || $FORCE == 1 ]] ||
			die "$2 $1, not of the $SERIES_XY series (source version differs from kernel $KREL)" "$3"
		return 0
	fi
	[[ $1 == "$UPSTREAM" || $FORCE == 1 ]] ||
		die "$2 $1, not $UPSTREAM (source version differs from kernel $KREL)" "$3"
}

# want_version: the version a source must have, in words
want_version() {
	if [[ $KERNEL_UPSTREAM_EXACT == 0 ]]; then
		printf 'the %s series (the kernel package %s)\n' "$SERIES_XY" "${DEBVER:-?}"
	else
		printf 'exactly %s\n' "$UPSTREAM"
	fi
}

# copy_or_die DIR DEST: DIR's files into the new directory DEST, or die naming the cause
copy_or_die() {
	local err # in a variable: a full disk cannot take a file of it either
	if ! err=$(mkdir -p "$2" 2>&1) || ! err=$(cp -a "$1/." "$2/" 2>&1); then
		die "cannot copy $1 to $2 ($(head -n1 <<<"$err"))" \
			"free space in ${TMPDIR:-/var/tmp} or point TMPDIR at a directory with room, then try again"
	fi
}

extract_from_tarball() { # TARBALL
	local tarball=$1
	if memo_get "$tarball"; then
		local v
		v=$(<"$WORK/memo.version")
		same_version_or_die "$v" "$tarball holds linux" "use the source of exactly $KREL or pass --force to use it anyway"
		return 0
	fi
	local top rc=0
	top=$(rxe_kvfix_extract_rxe "$tarball" "$WORK/x") || rc=$?
	case $rc in
	0) ;;
	2) die "$tarball has no $DRIVER_DIR/rxe_mr.c" "use the full source tarball of the kernel, not headers" ;;
	*) die "cannot read $tarball (corrupt or truncated: ${top//$'\t'/ })" "download it again or remove it from the cache" ;;
	esac
	# the version the tarball really holds, from its top-level Makefile
	local v
	v=$(tree_version "$top")
	same_version_or_die "$v" "$tarball holds linux" "use the source of exactly $KREL or pass --force to use it anyway"
	copy_or_die "$top/$DRIVER_DIR" "$WORK/rxe"
	rm -rf "$WORK/x"
	# an archive of more than a few MB that stays (not a kept rxe part of the cache,
	# not the tarball inside a source RPM, which is memoized as the source RPM)
	[[ $tarball == "$WORK"/* || $(stat -c %s "$tarball") -lt 4000000 ]] || memo_put "$tarball" "$v"
}

tree_version() { # DIR -> x.y.z from its top Makefile (the library's reading, no EXTRAVERSION)
	local v
	v=$(rxe_kvfix_tree_version "$1")
	printf '%s\n' "${v%%-*}"
}

provider_tree() {
	[[ -n $TREE ]] || return 1
	[[ -e $TREE ]] || die "kernel tree '$TREE' does not exist" "pass the top directory of a kernel source tree"
	[[ -d $TREE ]] || die "kernel tree '$TREE' is not a directory" "pass the top directory of a kernel source tree"
	[[ -f $TREE/$DRIVER_DIR/rxe_mr.c && -f $TREE/Makefile ]] ||
		die "'$TREE' has no $DRIVER_DIR/rxe_mr.c" "pass the top directory of a full kernel source tree"
	local v
	v=$(tree_version "$TREE")
	# an explicitly named tree is authoritative: never fall back to another source
	same_version_or_die "$v" "kernel tree $TREE is version" "pass the tree of $(want_version) or add --force to use it anyway"
	copy_or_die "$TREE/$DRIVER_DIR" "$WORK/rxe"
	PROVIDER=tree SOURCE_DESC=$TREE SOURCE_VERSION=$v
}

provider_debian() {
	local t pkgver
	for t in "$KERNEL_SRCTAR".{xz,zst,bz2,gz}; do
		[[ -f $t ]] || continue
		pkgver=$(dpkg-query -W -f '${Version}' "$SRCBIN" 2>/dev/null || true)
		if [[ -n $DEBVER && $pkgver == "$DEBVER" ]] ||
			[[ -z $DEBVER && ${pkgver%%-*} == "$UPSTREAM" ]] || [[ $FORCE == 1 ]]; then
			extract_from_tarball "$t"
			PROVIDER=debian SOURCE_DESC="$t ($SRCBIN $pkgver)" SOURCE_VERSION=$pkgver
			return 0
		fi
		MISMATCH="$t is $SRCBIN ${pkgver:-of unknown version}, the kernel is ${DEBVER:-$UPSTREAM}"
	done
	return 1
}

provider_cache() {
	[[ -d $CACHE ]] || return 1
	local t want=()
	if [[ -n $DEBVER ]]; then
		want+=("$CACHE/${SRCBIN}_${DEBVER}.tar."{xz,zst,bz2,gz})
	else
		# kernel not installed from a Debian package: any Debian revision of
		# the same upstream version, newest first
		mapfile -t -O "${#want[@]}" want < <(printf '%s\n' "$CACHE/linux-source-${SERIES_XY}_${UPSTREAM}"-*.tar.* |
			grep -v '\*' | sort -rV)
	fi
	# what the Fedora fetch keeps: the rxe part of kernel-N-V-R.src.rpm
	! rxe_kvfix_fedora_like || want+=("$CACHE/kernel-$KERNEL_NVR.rxe.tar.xz")
	want+=("$CACHE/linux-$UPSTREAM.tar."{xz,zst,bz2,gz})
	# upstream tarballs of x.y.0 are called linux-x.y
	[[ $UPSTREAM == *.0 ]] && want+=("$CACHE/linux-${UPSTREAM%.0}.tar."{xz,zst,bz2,gz})
	for t in "${want[@]}"; do
		[[ -f $t ]] || continue
		extract_from_tarball "$t"
		PROVIDER=cache SOURCE_DESC=$t SOURCE_VERSION=${DEBVER:-$UPSTREAM}
		return 0
	done
	for t in "$CACHE/${SRCBIN}"_*.tar.* "$CACHE"/linux-"$SERIES_XY"*.tar.*; do
		[[ -f $t ]] || continue
		MISMATCH="$t is not the source of ${DEBVER:-$UPSTREAM}"
		if [[ $FORCE == 1 ]]; then
			extract_from_tarball "$t"
			PROVIDER=cache SOURCE_DESC="$t (forced)" SOURCE_VERSION=unknown
			return 0
		fi
	done
	return 1
}

provider_srpm() {
	local srpm=$SRPM f
	if [[ -z $srpm ]]; then
		# kernel-7.1.10-200.fc44.src.rpm for 7.1.10-200.fc44.x86_64
		[[ -f $CACHE/kernel-$KERNEL_NVR.src.rpm ]] && srpm=$CACHE/kernel-$KERNEL_NVR.src.rpm
	fi
	if [[ -z $srpm && -d $CACHE ]]; then
		# a kernel whose release is not Fedora's N-V-R.arch (a rebuilt or
		# renamed kernel): the one kernel-<upstream>-*.src.rpm of its version;
		# the tarball's own Makefile is checked below all the same
		local c=()
		mapfile -t c < <(printf '%s\n' "$CACHE/kernel-$UPSTREAM"-*.src.rpm | grep -v '\*')
		if ((${#c[@]} == 1)); then
			srpm=${c[0]}
			say "no kernel-$KERNEL_NVR.src.rpm; using $(basename "$srpm"), the one source RPM of linux $UPSTREAM in $CACHE"
		elif ((${#c[@]} > 1)); then
			MISMATCH="several source RPMs of linux $UPSTREAM in $CACHE ($(printf '%s ' "${c[@]##*/}")), none named kernel-$KERNEL_NVR.src.rpm"
		fi
	fi
	[[ -n $srpm ]] || return 1
	[[ -e $srpm ]] || die "source RPM '$srpm' does not exist" "pass the path of kernel-<version>.src.rpm"
	[[ -f $srpm ]] || die "source RPM '$srpm' is not a file" "pass the path of kernel-<version>.src.rpm"
	[[ $srpm == /* ]] || srpm=$PWD/$srpm # unpacked from inside $WORK/srpm
	if ! command -v rpm2cpio >/dev/null || ! command -v cpio >/dev/null; then
		die "rpm2cpio/cpio are not installed" "install rpm2cpio and cpio (Debian: apt install rpm2cpio cpio)"
	fi
	if memo_get "$srpm"; then
		local v
		v=$(<"$WORK/memo.version")
		same_version_or_die "$v" "$srpm holds linux" "use the source RPM of exactly $KREL or add --force to use it anyway"
		for f in $(<"$WORK/memo.applied"); do say "applied the rxe part of distribution patch $f"; done
		PROVIDER=srpm SOURCE_DESC=$srpm SOURCE_VERSION=$v
		return 0
	fi
	local err
	if ! err=$(rxe_kvfix_srpm_unpack "$srpm" "$WORK/srpm"); then
		[[ -z $err ]] || say "$err"
		die "cannot unpack $srpm (corrupt or truncated)" "download the source RPM again"
	fi
	local tarball=
	for f in "$WORK/srpm"/linux-*.tar.*; do [[ -f $f ]] && tarball=$f && break; done
	[[ -n $tarball ]] || die "$srpm holds no linux-*.tar.* tarball" "use the kernel source RPM (kernel-<version>.src.rpm)"
	local base v
	base=$(basename "$tarball")
	v=${base#linux-}
	v=${v%.tar.*}
	[[ $v == *.*.* ]] || v=$v.0
	same_version_or_die "$v" "$srpm holds linux" "use the source RPM of exactly $KREL or add --force to use it anyway"
	extract_from_tarball "$tarball"
	local applied
	if ! applied=$(rxe_kvfix_srpm_rxe_patches "$WORK/srpm" "$WORK/rxe" 5); then
		die "the distribution patch ${applied##*$'\n'} does not apply to the rxe source of $base" \
			"report it with the source RPM's name"
	fi
	for f in $applied; do say "applied the rxe part of distribution patch $f"; done
	# shellcheck disable=SC2086  # the patch names, one word each
	memo_put "$srpm" "$v" $applied
	PROVIDER=srpm SOURCE_DESC=$srpm SOURCE_VERSION=$v
}

# --- fetch: the distribution's own copy of the kernel's source -----------------
# kmod/rxe-kvfix-fetch does it (apt-get download linux-source-X.Y=<version>, else
# the source package from the source archive; verified by apt) and keeps what the
# build needs in the cache, where provider_cache then finds it. A failure is one
# line in FETCH_FAIL (why) and FETCH_REMEDY (what to do).
FETCH_FAIL='' FETCH_REMEDY=''
run_fetch() { # ARGS...: rxe-kvfix-fetch ARGS KREL VERSION; FETCH_FAIL/REMEDY on failure
	local rc=0 line q=() ver=$DEBVER
	[[ $QUIET == 0 ]] || q=(-q)
	[[ ${1:-} != --fedora ]] || ver=$KERNEL_NVR
	line=$("$HERE/rxe-kvfix-fetch" "${q[@]}" --cache "$CACHE" --timeout "$FETCH_TIMEOUT" --archive "$ARCHIVE" --why-file "$WORK/fetch.why" \
		"$@" "$KREL" "$ver") || rc=$?
	if ((rc != 0)); then
		if [[ -s $WORK/fetch.why ]]; then
			IFS=$'\t' read -r FETCH_FAIL FETCH_REMEDY <"$WORK/fetch.why"
		else
			FETCH_FAIL="kmod/rxe-kvfix-fetch exited $rc" FETCH_REMEDY="run it by hand to see why"
		fi
		return 1
	fi
	say "fetch: $line"
}

# provider_deb: a linux-source .deb (KERNEL_SRCBIN) of exactly the kernel's version put in the
# cache by hand (what an offline host is told to do): kept as the fetch keeps it
provider_deb() {
	[[ -n $DEBVER && -d $CACHE ]] || return 1
	local deb
	deb=$(find "$CACHE" -maxdepth 1 -name "${SRCBIN}_${DEBVER}_*.deb" -print -quit 2>/dev/null)
	[[ -n $deb ]] || return 1
	if ! run_fetch --deb "$deb"; then
		rm -f "$deb"
		die "$FETCH_FAIL; removed it" "download it again (apt-get download $SRCBIN=$DEBVER) and put it in $CACHE/"
	fi
	rm -f "$deb"
	provider_cache
}

# A kernel-install plugin (kernel-install exports KERNEL_INSTALL_*) or an RPM
# scriptlet of ours (RXE_KVFIX_IN_TRANSACTION) runs inside the package manager's
# transaction, where dnf must not be run: the Fedora fetch is left to
# rxe-kvfix-fetch@.service, which the kernel hook starts, and to the boot repair.
in_transaction() { [[ -n ${KERNEL_INSTALL_LAYOUT:-}${KERNEL_INSTALL_STAGING_AREA:-}${RXE_KVFIX_IN_TRANSACTION:-} ]]; }
FETCH_DEFERRED=0

provider_fetch() {
	[[ $FETCH == auto ]] || return 1
	# Fedora/RHEL-style: the kernel's source RPM with dnf, outside any transaction
	if rxe_kvfix_fedora_like && { command -v dnf5 || command -v dnf; } >/dev/null; then
		if in_transaction; then
			FETCH_DEFERRED=1
		elif run_fetch --fedora; then
			provider_cache && PROVIDER=fetch && return 0
			FETCH_FAIL="the fetched source of $KREL was not usable" FETCH_REMEDY="report it"
		fi
		return 1
	fi
	# Debian/Ubuntu-style: a kernel installed from a Debian package, on a host
	# whose os-release does not name Fedora or a relative
	if [[ -n $DEBVER ]] && ! rxe_kvfix_fedora_like && command -v apt-get >/dev/null; then
		if run_fetch; then
			provider_cache && PROVIDER=fetch && return 0
			FETCH_FAIL="the fetched source of $KREL was not usable" FETCH_REMEDY="report it"
		fi
	fi
	return 1
}

# fetch_hint: what to do by hand when the kernel's source cannot be fetched here
fetch_hint() {
	printf 'on a host that reaches the archive run apt-get download %s=%s and put that .deb in %s/' "$SRCBIN" "$DEBVER" "$CACHE"
	# an Ubuntu source package other than linux (HWE since 6.8) builds no linux-source
	[[ $KERNEL_FAMILY != ubuntu || $KERNEL_SRCPKG == linux || -z $KERNEL_SRCPKG ]] ||
		printf ' (where the archive has none: apt-get source %s=%s, then pass --kernel-tree with the unpacked tree)' "$KERNEL_SRCPKG" "$DEBVER"
	printf ', then dkms autoinstall -k %s\n' "$KREL"
}

# defer CAUSE REMEDY: the one line, and exit 75: the source comes after the transaction
defer() {
	printf '%s: deferred: %s; %s\n' "$PROG" "$1" "$2" >&2
	exit "$EX_DEFER"
}

find_source() {
	local p
	memo_prune
	for p in tree debian cache deb srpm fetch; do
		if "provider_$p"; then
			say "source: $PROVIDER: $SOURCE_DESC"
			return 0
		fi
	done
	if [[ -n $FETCH_FAIL ]]; then
		die "no source of kernel $KREL here and the download failed: $FETCH_FAIL" "$FETCH_REMEDY"
	fi
	if [[ -n $DEBVER && $FETCH == never ]]; then
		die "no source of kernel $KREL here, and fetch=never ($CONF or --no-fetch)" \
			"$(fetch_hint)"
	fi
	if [[ -n $MISMATCH ]]; then
		die "no source of kernel $KREL found (${MISMATCH})" \
			"use the source of exactly ${DEBVER:-$UPSTREAM} ($([[ $KERNEL_FAMILY == ubuntu ]] && echo Ubuntu || echo Debian): apt install $SRCBIN=${DEBVER:-<version>}) or pass --force to use it anyway"
	fi
	if rxe_kvfix_fedora_like && [[ $FETCH_DEFERRED == 1 ]]; then
		# not an error: the record's state says deferred, and that state alone
		# makes the kernel hook start the fetch unit (rxe-kvfix queue)
		defer "no source of kernel $KREL found (tried: kernel tree, $CACHE/kernel-$KERNEL_NVR.src.rpm, tarballs in $CACHE); its source RPM is downloaded once this package transaction is over (rxe-kvfix-fetch@$KREL.service) or at the next boot (rxe-kvfix-boot.service)" \
			"nothing to do; to do it by hand: dnf download --srpm kernel-$KERNEL_NVR && mkdir -p $CACHE && mv kernel-*.src.rpm $CACHE/ (dnf4: --source for --srpm), then dkms autoinstall -k $KREL"
	fi
	if rxe_kvfix_fedora_like; then
		die "no source of kernel $KREL found (tried: kernel tree, $CACHE/kernel-$KERNEL_NVR.src.rpm, tarballs in $CACHE)" \
			"dnf download --srpm kernel-$KERNEL_NVR && mkdir -p $CACHE && mv kernel-*.src.rpm $CACHE/ (dnf4: --source for --srpm)"
	fi
	die "no source of kernel $KREL found (tried: kernel tree, $KERNEL_SRCTAR.*, $CACHE, Fedora source RPM)" \
		"install $SRCBIN ($([[ $KERNEL_FAMILY == ubuntu ]] && echo Ubuntu || echo Debian)), put the kernel's tarball or kernel-*.src.rpm in $CACHE, or pass --kernel-tree DIR"
}
