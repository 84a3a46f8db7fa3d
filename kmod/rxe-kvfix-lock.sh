# shellcheck shell=bash
# rxe-kvfix-lock.sh: one build at a time (sourced by kmod/rxe-kvfix-lib.sh).
#
# DKMS keeps one build directory per module and version
# (/var/lib/dkms/rxe-kvfix/VERSION/build) and takes no lock: two builds of two
# kernels at once (the rxe-kvfix-fetch@ units of three deferred Fedora kernels, the
# boot repair beside a package script) delete each other's tree mid-prepare or
# mid-kbuild. Every path of rxe-kvfix that builds therefore takes one host-wide lock,
# flock(2) on RXE_KVFIX_LOCK (default /run/lock/rxe-kvfix.lock), and waits its turn:
#   rxe-kvfix repair (the boot unit, the fetch units, the kernel hook's boot|fetch)
#                        around its whole `dkms autoinstall -k RELEASE`
#   rxe-kvfix fetch      around the fetch
#   rxe-kvfix-dkms-build DKMS's PRE_BUILD (any dkms run: DKMS's own kernel hooks and
#                        boot unit, dh_dkms's postinst, the RPM's %post, make module);
#                        taken there first (a dkms no rxe-kvfix command started), it
#                        stays held until that dkms exits (rxe_kvfix_lock_hold_for), so
#                        that DKMS's MAKE and install after PRE_BUILD are covered too,
#                        and the same dkms's next kernel goes on under it
# What no lock of ours can cover: a dkms that no rxe-kvfix command started copies the
# source into the build directory before its PRE_BUILD runs, so it is serialized with
# the others from PRE_BUILD on only; those run inside the package manager, one
# transaction at a time, and rxe-kvfix-boot.service is ordered after dkms.service.
# A locked path that runs another one (repair -> dkms autoinstall -> PRE_BUILD) passes
# the lock down: the holder exports RXE_KVFIX_LOCK_FD, the number of the descriptor
# it holds the lock on, which its children inherit; flock(2) on that same open file
# succeeds at once, so the nested call goes on (a descriptor of another open of the
# file, or none, waits like any other caller). The lock is released when the last
# process holding that descriptor exits.
# Waiting says so in one line (to stderr and, where logger is, the journal):
#   PROG: waiting for the build of RELEASE by PID N (WHAT) to end (lock FILE; at most S s)
# and is bounded by RXE_KVFIX_LOCK_TIMEOUT seconds (default 1800, as the build's own
# timeout): then the caller does not build and says why (rxe_kvfix_lock returns 1 with
# KVFIX_LOCK_WHY). The lock file holds "PID RELEASE WHAT" of its holder, and
# "for-pid=PID" when it is held until that dkms exits.

rxe_kvfix_lock_file() { printf '%s\n' "${RXE_KVFIX_LOCK:-/run/lock/rxe-kvfix.lock}"; }

# rxe_kvfix_lock RELEASE WHAT: hold the build lock for this process (and its
# children) before building RELEASE; WHAT names the caller in the holder's line.
# 0: held (taken now, or passed down by the caller); 1: not taken, KVFIX_LOCK_WHY
# says why in words.
# shellcheck disable=SC2034  # KVFIX_LOCK_WHY: read by the callers
rxe_kvfix_lock() {
	local k=$1 what=$2 f fd hpid='' hk='' hwhat='' limit=${RXE_KVFIX_LOCK_TIMEOUT:-1800} prog=${PROG:-rxe-kvfix}
	f=$(rxe_kvfix_lock_file)
	KVFIX_LOCK_WHY='' KVFIX_LOCK_TAKEN=0
	if ! command -v flock >/dev/null; then
		printf '%s: warning: flock (util-linux) is not installed: building %s without the lock %s\n' "$prog" "$k" "$f" >&2
		return 0
	fi
	fd=${RXE_KVFIX_LOCK_FD:-}
	# passed down: the inherited descriptor is open on the lock file and flock(2) on
	# it succeeds at once (same open file: this process tree holds it already)
	if [[ $fd =~ ^[0-9]+$ && -e /dev/fd/$fd && /dev/fd/$fd -ef $f ]] && flock -n "$fd" 2>/dev/null; then
		return 0
	fi
	[[ -d ${f%/*} ]] || mkdir -p -- "${f%/*}" 2>/dev/null || true
	if ! { exec {fd}<>"$f"; } 2>/dev/null; then
		KVFIX_LOCK_WHY="cannot open the build lock $f (make ${f%/*} writable by root, or set RXE_KVFIX_LOCK)"
		return 1
	fi
	if ! flock -n "$fd"; then
		read -r hpid hk hwhat <"$f" || true
		# held by the watcher of this very dkms (rxe_kvfix_lock_hold_for): a dkms that
		# builds several kernels in one run, one after the other; covered until it exits
		local for_pid
		for_pid=$(sed -n 's/^for-pid=//p' "$f" 2>/dev/null | head -n1)
		if [[ -n $for_pid && $for_pid == "$(rxe_kvfix_ancestor dkms)" ]]; then
			exec {fd}>&-
			return 0
		fi
		local line="waiting for the build of ${hk:-a kernel} by PID ${hpid:-?}${hwhat:+ ($hwhat)} to end (lock $f; at most $limit s)"
		printf '%s: %s\n' "$prog" "$line" >&2
		if command -v logger >/dev/null; then logger -t rxe-kvfix -- "$prog: kernel $k: $line" 2>/dev/null || true; fi
		if ! flock -w "$limit" "$fd"; then
			exec {fd}>&-
			KVFIX_LOCK_WHY="the build of ${hk:-a kernel} by PID ${hpid:-?} held the lock $f for more than $limit s (RXE_KVFIX_LOCK_TIMEOUT)"
			return 1
		fi
	fi
	printf '%s %s %s\n' "$BASHPID" "$k" "$what" >"$f" 2>/dev/null || true
	export RXE_KVFIX_LOCK_FD=$fd
	KVFIX_LOCK_TAKEN=1
	return 0
}

# rxe_kvfix_lock_hold_for NAME: when this process took the lock itself (not passed
# down) and runs under a process named NAME (its nearest such ancestor: the dkms that
# runs PRE_BUILD from DKMS's own kernel hook, dh_dkms's postinst or the RPM's %post),
# keep the lock held until that process exits: DKMS's steps after PRE_BUILD (MAKE, the
# copy of the module, the install) use the shared build directory too. A watcher in
# the background holds the descriptor, with no other one open (an inherited pipe of
# DKMS's would keep DKMS waiting for it), and checks once a second.
rxe_kvfix_lock_hold_for() {
	local p n fd=${RXE_KVFIX_LOCK_FD:-}
	[[ ${KVFIX_LOCK_TAKEN:-0} == 1 && $fd =~ ^[0-9]+$ ]] || return 0
	p=$(rxe_kvfix_ancestor "$1") || return 0
	printf 'for-pid=%s\n' "$p" >>"$(rxe_kvfix_lock_file)" 2>/dev/null || true
	(
		exec </dev/null >/dev/null 2>&1
		for n in /proc/"$BASHPID"/fd/*; do
			# (the glob's own descriptor is listed, and gone by now)
			[[ -e $n ]] || continue
			n=${n##*/}
			[[ $n == 0 || $n == 1 || $n == 2 || $n == "$fd" ]] || exec {n}>&- || true
		done
		while [[ -d /proc/$p ]]; do sleep 1; done
	) &
	return 0
}

# rxe_kvfix_is_proc PID NAME: process PID runs NAME: its name (/proc/PID/comm; a
# script run by its #! line has the script's), or its interpreter's first argument
# (a script whose #! line is /usr/bin/env bash, or run as bash NAME)
rxe_kvfix_is_proc() {
	local argv
	[[ $(cat "/proc/$1/comm" 2>/dev/null) != "$2" ]] || return 0
	argv=$(tr '\0' '\n' 2>/dev/null <"/proc/$1/cmdline" | head -n2) || return 1
	[[ $argv =~ ^(.*/)?(ba)?sh$'\n'(.*/)?([^/]*)$ && ${BASH_REMATCH[4]} == "$2" ]]
}

# rxe_kvfix_ancestor NAME: the PID of this process's nearest ancestor running NAME,
# and of that one the topmost of its unbroken line of parents running NAME (a bash
# script's subshells look the same: DKMS runs PRE_BUILD in one); 1 when there is none
rxe_kvfix_ancestor() {
	local p=$PPID st found=''
	while ((p > 1)); do
		if rxe_kvfix_is_proc "$p" "$1"; then
			found=$p
		elif [[ -n $found ]]; then
			break
		fi
		st=$(cat "/proc/$p/stat" 2>/dev/null) || break
		st=${st##*) }
		read -r _ p _ <<<"$st"
	done
	[[ -n $found ]] || return 1
	printf '%s\n' "$found"
}
