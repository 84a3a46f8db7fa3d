# shellcheck shell=bash
# rxe-kvfix-pkg.sh: what the packages' scripts do, as `rxe-kvfix pkg-*` commands
# (sourced by kmod/rxe-kvfix), so that the scriptlets are a line each and this logic is
# linted (as DKMS's common.postinst is for the packages dh_dkms makes):
#   pkg-register VERSION     RPM %post: exactly VERSION registered with DKMS and built
#                            and installed for every kernel with development files
#   pkg-register --if-unregistered VERSION
#                            RPM %posttrans: the same, only when the package this one
#                            replaced unregistered VERSION in its %preun (1.0.0-1's did)
#   pkg-erase VERSION        RPM %preun on erase: pending rxe-kvfix-fetch@ units stopped,
#                            VERSION unregistered (DKMS restores every kernel's stock
#                            rdma_rxe), the records and fetched sources removed
# Debian's postinst runs `rxe-kvfix report` (dh_dkms's own part builds); its postrm's
# purge stays inline: dpkg has removed this file by then.
# None of them fails the package transaction: they say what went wrong and exit 0.

PKG_DKMS=rxe-kvfix

# pkg_registered VERSION: DKMS knows rxe-kvfix VERSION. Not `dkms status | grep -q .`:
# under rxe-kvfix's pipefail, grep -q ending at the first line makes dkms's next write a
# SIGPIPE, and the pipeline false for a version that is registered (with several
# kernels, an erase then left the module registered)
pkg_registered() { [[ -n $(dkms status -m "$PKG_DKMS" -v "$1" 2>/dev/null) ]]; }

# pkg_register VERSION: Fedora/RPM Fusion DKMS practice: register, then build and install
# for every kernel that has its development files. Another registered version (this is
# an update or a downgrade; its tree is still on disk until this transaction removes the
# old package) is unregistered first, so that exactly VERSION is left. A kernel that
# already has VERSION installed keeps it: no rebuild for a same-version update (a
# Release-only one, dnf reinstall). Inside the transaction dnf must not run: a kernel
# whose source RPM is missing gets it from rxe-kvfix-fetch@KVER.service once the
# transaction is over (queue).
pkg_register() {
	local ver=$1 v dir kver rc log status
	export RXE_KVFIX_IN_TRANSACTION=1
	for v in $(dkms status -m "$PKG_DKMS" 2>/dev/null | sed -n "s|^$PKG_DKMS/\\([^,:]*\\)[,:].*|\\1|p" | sort -u); do
		[[ $v != "$ver" ]] || continue
		echo "rxe-kvfix-dkms: unregistering rxe-kvfix $v from DKMS (replaced by $ver)"
		dkms remove -m "$PKG_DKMS" -v "$v" --all >/dev/null 2>&1 || :
	done
	pkg_registered "$ver" || dkms add -m "$PKG_DKMS" -v "$ver" >/dev/null || :
	for dir in "${RXE_KVFIX_MODULES_DIR:-/lib/modules}"/*/build; do
		[[ -e $dir ]] || continue
		kver=${dir%/build}
		kver=${kver##*/}
		case $(dkms status -m "$PKG_DKMS" -v "$ver" -k "$kver" 2>/dev/null) in
		*": installed"*)
			echo "rxe-kvfix-dkms: rdma_rxe $ver already installed for $kver, kept"
			continue
			;;
		esac
		rc=0
		dkms install -m "$PKG_DKMS" -v "$ver" -k "$kver" >/dev/null 2>&1 || rc=$?
		log=/var/lib/dkms/$PKG_DKMS/$ver/build/make.log
		status=$(rxe_kvfix_state_dir)/status/$kver
		# 77: PRE_BUILD's skip, for a kernel that does not need rxe-kvfix and for one it
		# could not build; the record tells them apart (status exits 0 on the first)
		if [[ $rc == 77 ]] && ! "$HERE/rxe-kvfix" status "$kver" >/dev/null 2>&1; then rc=failed; fi
		case $rc in
		0) echo "rxe-kvfix-dkms: rdma_rxe built and installed for $kver" ;;
		77) echo "rxe-kvfix-dkms: $kver does not need rxe-kvfix; its own rdma_rxe stays ($log)" ;;
		*)
			echo "rxe-kvfix-dkms: warning: DKMS could not build rdma_rxe for $kver ($([[ $rc == failed ]] && echo "recorded in $status" || echo "exit $rc")); its own rdma_rxe stays; see dkms status and $log" >&2
			(cmd_report "$kver") || :
			(cmd_queue "$kver") || :
			;;
		esac
	done
}

# pkg_stop_fetch_units: every rxe-kvfix-fetch@ unit systemd has loaded (waiting for this
# transaction to end, or queued to start) stopped, so that none runs `dkms autoinstall`
# against the tree this erase removes. Nothing where systemd is not running.
pkg_stop_fetch_units() {
	[[ -d /run/systemd/system ]] || return 0
	local units=()
	mapfile -t units < <(systemctl list-units --all --plain --no-legend --type=service 'rxe-kvfix-fetch@*' 2>/dev/null |
		awk '$1 ~ /^rxe-kvfix-fetch@.*\.service$/ { print $1 }')
	((${#units[@]})) || return 0
	echo "rxe-kvfix-dkms: stopping ${units[*]} (rxe-kvfix is being removed)"
	systemctl stop "${units[@]}" || say "could not stop ${units[*]}: systemctl status ${units[0]}"
}

# pkg_erase VERSION: what %preun does on erase
pkg_erase() {
	local ver=$1 p
	pkg_stop_fetch_units
	# every kernel gets its stock rdma_rxe back (dkms restores it)
	if pkg_registered "$ver"; then
		dkms remove -m "$PKG_DKMS" -v "$ver" --all || :
	fi
	# what PRE_BUILD recorded per kernel goes too, and the sources it fetched (those with
	# a .provenance file; files put there by hand stay) and the rxe parts its builds
	# kept (sources/.memo)
	rm -rf "$(rxe_kvfix_state_dir)"
	for p in "$CACHE_DIR"/*.provenance; do
		[[ -f $p ]] || continue
		rm -f "${p%.provenance}" "$p"
	done
	rm -rf "$CACHE_DIR/.memo"
}

# cmd_pkg COMMAND ARGS...: the pkg-* commands; exit 0 whatever happened inside (a
# package script must not fail the transaction), 2 on a usage error
cmd_pkg() {
	local cmd=$1 if_unregistered=0
	shift
	[[ $cmd != pkg-register || ${1:-} != --if-unregistered ]] || {
		if_unregistered=1
		shift
	}
	if (($# != 1)) || [[ ! $1 =~ ^[0-9][0-9A-Za-z.+~_]*$ ]]; then
		usage_error "$cmd: needs the package's VERSION (as META's Version, e.g. $VERSION)"
	fi
	case $cmd in
	pkg-register)
		if ((if_unregistered)); then
			! pkg_registered "$1" || return 0
			echo "rxe-kvfix-dkms: $1 was unregistered by the package this one replaced; registering it again" >&2
		fi
		(pkg_register "$1") || :
		;;
	pkg-erase) (pkg_erase "$1") || : ;;
	esac
	return 0
}
