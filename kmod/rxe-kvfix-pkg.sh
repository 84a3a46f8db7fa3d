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

# One initramfs regeneration per package operation. DKMS runs its framework's
# post_transaction after every `dkms install` and `dkms remove` that succeeds (dkms.in,
# 3.2.0 on); Fedora's dkms package sets it to `dracut --regenerate-all --force`, so an
# update over three kernels regenerated every initramfs three times inside the
# transaction (docs/lifecycle.md). pkg_tx_begin gives our inner dkms calls a private
# mount namespace in which /etc/dkms is a copy with post_transaction emptied (the
# administrator's files are read, never edited); pkg_tx_end runs the command once if
# any of those calls would have run it. Where no private namespace can be made (no
# unshare, no privilege), dkms runs as it is and regenerates as DKMS decides.
PKG_TX_DIR='' PKG_TX_CMD='' PKG_TX_PENDING=0 PKG_TX_KVER=''

# pkg_tx_command: post_transaction as DKMS reads it (framework.conf, then
# framework.conf.d/*.conf, the last setting winning), empty when unset
pkg_tx_command() {
	(
		set +eu
		post_transaction=''
		for f in /etc/dkms/framework.conf /etc/dkms/framework.conf.d/*.conf; do
			# shellcheck disable=SC1090 # the administrator's DKMS configuration
			[[ ! -e $f ]] || . "$f" >/dev/null 2>&1
		done
		printf '%s' "$post_transaction"
	) 2>/dev/null || :
}

pkg_tx_begin() {
	PKG_TX_CMD=$(pkg_tx_command) PKG_TX_PENDING=0 PKG_TX_DIR=''
	[[ -n $PKG_TX_CMD && -d /etc/dkms ]] && command -v unshare >/dev/null || return 0
	PKG_TX_DIR=$(mktemp -d "${TMPDIR:-/tmp}/rxe-kvfix-dkms.XXXXXX") || return 0
	if ! {
		mkdir -p "$PKG_TX_DIR/dkms/framework.conf.d" && cp -a /etc/dkms/. "$PKG_TX_DIR/dkms/" &&
			printf '# rxe-kvfix-dkms: its post_transaction runs once, after all its dkms calls\npost_transaction=""\n' \
				>"$PKG_TX_DIR/dkms/framework.conf.d/zzzz-rxe-kvfix-once.conf" &&
			unshare -m --propagation private -- mount --bind "$PKG_TX_DIR/dkms" /etc/dkms 2>/dev/null
	}; then
		rm -rf "$PKG_TX_DIR"
		PKG_TX_DIR=''
	fi
}

# pkg_dkms ARGS...: dkms ARGS, its post_transaction held back for pkg_tx_end
pkg_dkms() {
	local rc=0 a prev=''
	if [[ -n $PKG_TX_DIR ]]; then
		# shellcheck disable=SC2016 # expanded by sh
		unshare -m --propagation private -- sh -c 'mount --bind "$1" /etc/dkms && shift && exec dkms "$@"' \
			sh "$PKG_TX_DIR/dkms" "$@" || rc=$?
	else
		dkms "$@" || rc=$?
	fi
	# DKMS would have run post_transaction after this call
	case $1 in install | remove | uninstall) ((rc != 0)) || PKG_TX_PENDING=1 ;; *) return "$rc" ;; esac
	((rc != 0)) || for a in "$@"; do
		[[ $prev != -k ]] || PKG_TX_KVER=$a
		prev=$a
	done
	return "$rc"
}

pkg_tx_end() {
	local dir=$PKG_TX_DIR
	[[ -n $dir ]] || return 0
	rm -rf "$dir"
	PKG_TX_DIR=''
	((PKG_TX_PENDING)) || return 0
	echo "rxe-kvfix-dkms: DKMS's post_transaction, once for this operation: $PKG_TX_CMD"
	# as DKMS runs it: eval'd, $kernelver the last kernel of our calls, its output in
	# DKMS's post_transaction.log
	(
		set +eu
		# shellcheck disable=SC2034 # kernelver: for the administrator's command
		kernelver=$PKG_TX_KVER
		eval "$PKG_TX_CMD"
	) >/var/lib/dkms/post_transaction.log 2>&1 ||
		echo "rxe-kvfix-dkms: warning: DKMS's post_transaction '$PKG_TX_CMD' failed; see /var/lib/dkms/post_transaction.log" >&2
}

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
	pkg_tx_begin
	for v in $(dkms status -m "$PKG_DKMS" 2>/dev/null | sed -n "s|^$PKG_DKMS/\\([^,:]*\\)[,:].*|\\1|p" | sort -u); do
		[[ $v != "$ver" ]] || continue
		echo "rxe-kvfix-dkms: unregistering rxe-kvfix $v from DKMS (replaced by $ver)"
		pkg_dkms remove -m "$PKG_DKMS" -v "$v" --all >/dev/null 2>&1 || :
	done
	pkg_registered "$ver" || pkg_dkms add -m "$PKG_DKMS" -v "$ver" >/dev/null || :
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
		pkg_dkms install -m "$PKG_DKMS" -v "$ver" -k "$kver" >/dev/null 2>&1 || rc=$?
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
	pkg_tx_end
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
		pkg_tx_begin
		pkg_dkms remove -m "$PKG_DKMS" -v "$ver" --all || :
		pkg_tx_end
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
