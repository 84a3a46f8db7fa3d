# shellcheck shell=bash
# rxe-kvfix-repair.sh: `rxe-kvfix repair|fetch|forget|report|queue` (sourced by
# kmod/rxe-kvfix): what the kernel hooks, the kernel-install plugin, the boot unit and
# the fetch unit do, each a command an administrator can also type.

installed_for() { # RELEASE: DKMS has rxe-kvfix installed for it (its status captured
	# first: with pipefail, grep -q closing the pipe early would read as "no")
	local st
	st=$(dkms status -m rxe-kvfix -k "$1" 2>/dev/null || true)
	[[ $st == *': installed'* ]]
}

# reload: the running kernel's rdma_rxe becomes the installed one, when nothing
# uses it (no rxe link, no reference); else say that a reload or reboot is needed
reload() {
	if [[ ! -d /sys/module/rdma_rxe ]]; then
		say "rdma_rxe is not loaded: the next modprobe loads rxe-kvfix's"
		return 0
	fi
	local refs
	refs=$(cat /sys/module/rdma_rxe/refcnt 2>/dev/null || echo '?')
	if [[ $refs == 0 ]] && modprobe -r rdma_rxe 2>/dev/null && modprobe rdma_rxe; then
		say "reloaded rdma_rxe: $(modinfo -F version rdma_rxe 2>/dev/null)"
	else
		say "rdma_rxe is in use (refcnt $refs): remove its rxe links and run modprobe -r rdma_rxe && modprobe rdma_rxe, or reboot, to use rxe-kvfix"
	fi
}

# repair RELEASE: build rxe-kvfix for RELEASE if it has no module and its record
# does not say it needs none; reload rdma_rxe when RELEASE is running. Returns 1
# when it is still not built.
repair() {
	local k=$1 state rc=0 running
	running=$(uname -r)
	state=$(rxe_kvfix_recorded "$k" state)
	if [[ $state == not-needed ]]; then
		say "kernel $k does not need rxe-kvfix ($(rxe_kvfix_state_dir)/status/$k)"
		return 0
	fi
	command -v dkms >/dev/null || {
		say "dkms is not installed: nothing to build with (install dkms)"
		return "$EX_ENV"
	}
	if installed_for "$k"; then
		# the loaded module's version (sysfs: ours sets one, the in-tree has none), not
		# the file's on disk, which is already rxe-kvfix's
		if [[ $k == "$running" && -d /sys/module/rdma_rxe && $(cat /sys/module/rdma_rxe/version 2>/dev/null) != *-rxe-kvfix ]]; then
			reload
		fi
		return 0
	fi
	if [[ ! -e ${RXE_KVFIX_MODULES_DIR:-/lib/modules}/$k/build/Makefile ]]; then
		rxe_kvfix_record "$k" failed "no kernel headers for $k at boot: install them (Debian: apt install linux-headers-$k; Fedora: dnf install kernel-devel-$k); the next boot builds rxe-kvfix"
		say "$(rxe_kvfix_recorded "$k" message)"
		return 1
	fi
	# one build at a time (kmod/rxe-kvfix-lock.sh), held over the whole dkms run (its
	# copy into DKMS's build directory, PRE_BUILD, MAKE, the install) and passed down
	# to PRE_BUILD; a build that ran meanwhile may have done the work
	if ! rxe_kvfix_lock "$k" "rxe-kvfix repair"; then
		say "kernel $k: not built now: $KVFIX_LOCK_WHY; run rxe-kvfix repair $k once that build is over"
		return 1
	fi
	if installed_for "$k"; then
		say "kernel $k: rxe-kvfix was built and installed meanwhile (by the build waited for)"
		[[ $k != "$running" ]] || reload
		return 0
	fi
	say "kernel $k has no rxe-kvfix module${state:+ (recorded: $state)}: dkms autoinstall -k $k"
	timeout -k 30 "${RXE_KVFIX_BOOT_TIMEOUT:-1800}" dkms autoinstall -k "$k" || rc=$?
	if installed_for "$k"; then
		say "built and installed rxe-kvfix for $k"
		[[ $k != "$running" ]] || reload
		return 0
	elif ((rc == 124 || rc == 137)); then
		rxe_kvfix_record "$k" failed "dkms autoinstall at boot did not finish in ${RXE_KVFIX_BOOT_TIMEOUT:-1800} s; the next boot tries again"
		say "$(rxe_kvfix_recorded "$k" message)"
	elif [[ $(rxe_kvfix_recorded "$k" state) == not-needed ]]; then
		say "kernel $k does not need rxe-kvfix"
		return 0
	elif [[ $(rxe_kvfix_recorded "$k" state) == failed ]]; then
		say "not built: $(rxe_kvfix_recorded "$k" message); the next boot tries again"
	else
		say "dkms autoinstall -k $k exited $rc: $(rxe_kvfix_recorded "$k" message)"
	fi
	return 1
}

# rpm_lock_held: a process holds rpm's transaction lock (%_rpmlock_path, a POSIX
# write lock on DBPATH/.rpm.lock while any rpm transaction runs), whatever its name:
# PackageKit's packagekitd (GNOME Software, Cockpit, offline updates), dnf5daemon-server,
# dnf-automatic, or a command-line package manager. RXE_KVFIX_RPMLOCK: a test hook.
rpm_lock_held() {
	local f dev ino maj min
	f=${RXE_KVFIX_RPMLOCK:-$(rpm --eval '%{_rpmlock_path}' 2>/dev/null || true)}
	[[ -n $f && $f != *%* && -e $f ]] || return 1
	read -r dev ino < <(stat -Lc '%D %i' "$f" 2>/dev/null) || return 1
	dev=$((16#$dev))
	maj=$(((dev >> 8) & 0xfff)) min=$(((dev & 0xff) | ((dev >> 12) & 0xfff00)))
	# /proc/locks: "N: POSIX ADVISORY WRITE PID MAJ:MIN:INODE START END" (hex MAJ:MIN)
	awk -v id="$(printf '%02x:%02x:%s' "$maj" "$min" "$ino")" \
		'$2 == "POSIX" && $4 == "WRITE" && $6 == id { found = 1 } END { exit !found }' /proc/locks 2>/dev/null
}

# package_manager_busy: a package manager runs: one of the command-line ones by name,
# or anything holding rpm's transaction lock (rpm_lock_held)
package_manager_busy() {
	pgrep -x 'dnf|dnf5|dnf-3|yum|rpm|microdnf|rpm-ostree|dnf-automatic' >/dev/null 2>&1 || rpm_lock_held
}

# after_transaction RELEASE (rxe-kvfix-fetch@.service): wait until no package
# manager runs (the transaction that installed the kernel is over; at most
# RXE_KVFIX_WAIT_TIMEOUT s, default 1800), then repair RELEASE, unless that
# transaction (or one after it) removed rxe-kvfix from DKMS meanwhile
after_transaction() {
	local waited=0 limit=${RXE_KVFIX_WAIT_TIMEOUT:-1800}
	while package_manager_busy && ((waited < limit)); do
		((waited % 60 != 0)) || say "waiting for the package transaction to end (${waited}s)"
		sleep 5
		waited=$((waited + 5))
	done
	if ! command -v dkms >/dev/null || [[ -z $(dkms status -m rxe-kvfix 2>/dev/null || true) ]]; then
		say "rxe-kvfix was removed while this waited for the package transaction: nothing to build for $1"
		return 0
	fi
	repair "$1"
}

cmd_repair() {
	local wait=0 k=''
	while (($#)); do
		case $1 in
		--after-transaction) wait=1 ;;
		-*) usage_error "repair: unknown option '$1'" ;;
		*)
			[[ -z $k ]] || usage_error "repair: one RELEASE, got '$k' and '$1'"
			check_release "$1"
			k=$1
			;;
		esac
		shift
	done
	need_root repair
	# RXE_KVFIX_RELEASE: a test hook, to repair in a chroot an installed kernel that
	# is not the running one (nothing is reloaded then)
	k=${k:-${RXE_KVFIX_RELEASE:-$(uname -r)}}
	if ((wait)); then after_transaction "$k"; else repair "$k"; fi
}

# report RELEASE: the kernel's one line when it was not built (failed, or deferred)
report() {
	local state
	state=$(rxe_kvfix_recorded "$1" state)
	if [[ $state == failed || $state == deferred ]]; then
		printf 'rxe-kvfix: kernel %s: NOT BUILT, its in-tree rdma_rxe (without the fix) stays in use: %s [%s]\n' \
			"$1" "$(rxe_kvfix_recorded "$1" message)" "$(rxe_kvfix_state_dir)/status/$1" >&2
	fi
}

cmd_report() { # [RELEASE...]: report each, or every kernel recorded
	local k kernels=("$@")
	(($#)) || mapfile -t kernels < <(rxe_kvfix_recorded_kernels)
	for k in "${kernels[@]}"; do
		[[ -z $k || $k == */* ]] || report "$k"
	done
	return 0
}

# queue RELEASE: when the record's state is deferred (prepare never runs dnf inside a
# package transaction), start rxe-kvfix-fetch@RELEASE.service without waiting for
# it (as akmods does); where systemd is not running (a chroot, an image build) the
# boot repair does it. Decided on the state alone, never on the message's words.
cmd_queue() {
	(($# == 1)) || usage_error "queue: needs one RELEASE"
	check_release "$1"
	[[ $(rxe_kvfix_recorded "$1" state) == deferred ]] || return 0
	local unit
	# the instance escaped as systemd does ('-' stands for '/' in a unit name)
	if [[ -d /run/systemd/system ]] && unit=$(systemd-escape --template=rxe-kvfix-fetch@.service "$1" 2>/dev/null) &&
		systemctl start --no-block "$unit" 2>/dev/null; then
		printf "rxe-kvfix: kernel %s: its source is fetched and rxe-kvfix built in the background once this transaction is over: journalctl -u '%s'\n" "$1" "$unit" >&2
	else
		printf 'rxe-kvfix: kernel %s: its source is fetched and rxe-kvfix built at its first boot (rxe-kvfix-boot.service)\n' "$1" >&2
	fi
}

# fetch RELEASE: the source of RELEASE found or downloaded now (prepare's providers,
# fetch=auto), and kept when downloaded
cmd_fetch() {
	(($# == 1)) || usage_error "fetch: needs one RELEASE"
	check_release "$1"
	need_root fetch
	local prep=/usr/src/rxe-kvfix-$VERSION/kmod/rxe-kvfix-prepare out rc=0 class provider
	[[ -x $prep ]] || prep=$HERE/rxe-kvfix-prepare
	[[ -x $prep ]] || {
		say "no rxe-kvfix-prepare (neither /usr/src/rxe-kvfix-$VERSION/kmod nor $HERE): reinstall rxe-kvfix-dkms"
		return "$EX_ENV"
	}
	# the fetch writes the cache a build reads: one at a time with the builds
	if ! rxe_kvfix_lock "$1" "rxe-kvfix fetch"; then
		say "kernel $1: not fetched now: $KVFIX_LOCK_WHY; run rxe-kvfix fetch $1 once that build is over"
		return "$EX_FAIL"
	fi
	out=$("$prep" --classify "$1") || rc=$?
	((rc == 0)) || return "$EX_FAIL"
	read -r _ class provider <<<"$out"
	rxe_kvfix_kernel "$1"
	printf '%s: kernel %s: its source is here (%s, %s)' "$PROG" "$1" "$provider" "$(class_words "$class")"
	local p
	for p in "$CACHE_DIR"/*.provenance; do
		[[ -f $p ]] || continue
		if grep -qx "kernel=$1" "$p" || { [[ -n $KERNEL_PKGVER ]] && grep -qxF "version=$KERNEL_PKGVER" "$p"; }; then
			printf ', kept as %s' "${p%.provenance}"
			break
		fi
	done
	printf '\n'
}

# forget RELEASE: its record, and the source the fetch kept for it (the cache
# entries whose .provenance names it), unless another installed kernel has the
# same package version (flavours of one version share one source)
forget() {
	rxe_kvfix_is_release "$1" || return 0
	rxe_kvfix_forget_record "$1"
	local p ver other shared
	for p in "$CACHE_DIR"/*.provenance; do
		if [[ ! -f $p ]] || ! grep -qx "kernel=$1" "$p"; then continue; fi
		ver=$(sed -n 's/^version=//p' "$p")
		shared=''
		while read -r other; do
			[[ $other != "$1" ]] || continue
			rxe_kvfix_kernel "$other"
			[[ $KERNEL_PKGVER != "$ver" ]] || shared=$other
		done < <(rxe_kvfix_installed_kernels)
		if [[ -n $shared ]]; then
			# the kept source is now that kernel's: its removal forgets it
			sed -i "s/^kernel=.*/kernel=$shared/" "$p" || true
			say "kept $(basename "${p%.provenance}"): kernel $shared uses the same source"
		else
			rm -f "${p%.provenance}" "$p"
		fi
	done
}

cmd_forget() {
	(($# == 1)) || usage_error "forget: needs one RELEASE"
	check_release "$1"
	need_root forget
	forget "$1"
}
