# shellcheck shell=bash
# rxe-kvfix-record.sh: what became of each kernel, STATE_DIR/status/RELEASE: its one
# writer and its one reader. Sourced (by kmod/rxe-kvfix-lib.sh), never run.
#
# One file per kernel release, key=value lines:
#   kernel=RELEASE
#   state=built        rxe-kvfix's rdma_rxe was built for it (kmod/rxe-kvfix-dkms-build)
#         not-needed   its rxe source is fixed or unaffected: DKMS stepped aside
#         failed       not built; message says why and what to do
#         deferred     not built yet: its source is fetched once the package transaction
#                      that installed the kernel is over (Fedora: rxe-kvfix-fetch@RELEASE
#                      .service, which `rxe-kvfix queue` starts on this state alone)
#   time=UTC  version=the rxe-kvfix version that wrote it
#   message=one line: what happened and, when not built, what to do (for people:
#           nothing decides on its words)
#   class= series= provider= source=   what kmod/rxe-kvfix-prepare found, when it got
#           that far (classify_why's class, patches/SERIES, the source provider and
#           the source's description)
# STATE_DIR: RXE_KVFIX_STATE_DIR (tests), default /var/lib/rxe-kvfix. A log of the
# failed attempt (prepare's and kbuild's output) is kept beside it as RELEASE.log.
# Readers: rxe-kvfix status/report/queue/repair (kmod/rxe-kvfix), make dkms-install and
# the packages' scripts (through rxe-kvfix), rxe-verify doctor and the boot check
# (userspace/src/sys/procfs.cpp reads the same key=value lines).

KVFIX_STATES='built not-needed failed deferred'

rxe_kvfix_state_dir() { printf '%s\n' "${RXE_KVFIX_STATE_DIR:-/var/lib/rxe-kvfix}"; }

# rxe_kvfix_record RELEASE STATE MESSAGE [KEY=VALUE...]: write the kernel's record
# (atomically: a reader never sees half of one). Values are kept on one line.
rxe_kvfix_record() {
	local k=$1 state=$2 msg=${3//$'\n'/ } d f kv ver
	shift 3
	[[ " $KVFIX_STATES " == *" $state "* ]] || {
		echo "rxe-kvfix: internal error: record state '$state' is not one of $KVFIX_STATES" >&2
		return 1
	}
	d=$(rxe_kvfix_state_dir)/status
	f=$d/$k
	ver=$(rxe_kvfix_meta Version 2>/dev/null) || ver=$(rxe_kvfix_recorded "$k" version)
	mkdir -p "$d" || return 1
	{
		printf 'kernel=%s\nstate=%s\ntime=%s\nversion=%s\nmessage=%s\n' "$k" "$state" \
			"$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${ver:-unknown}" "$msg"
		for kv; do
			[[ $kv == [a-z]*=* ]] && printf '%s\n' "${kv//$'\n'/ }"
		done
	} >"$f.tmp.$$" && mv -f "$f.tmp.$$" "$f"
}

# rxe_kvfix_recorded RELEASE FIELD: a field of the kernel's record (empty when
# there is none)
rxe_kvfix_recorded() {
	[[ $1 != */* ]] || return 0
	# (a kernel without a record is an empty answer, not a failed pipe under pipefail)
	{ sed -n "s/^$2=//p" "$(rxe_kvfix_state_dir)/status/$1" 2>/dev/null || true; } | head -n1
}

# rxe_kvfix_recorded_kernels: the releases that have a record, one per line
rxe_kvfix_recorded_kernels() {
	local f
	for f in "$(rxe_kvfix_state_dir)"/status/*; do
		[[ -f $f && $f != *.log && $f != *.tmp.* ]] && printf '%s\n' "${f##*/}"
	done
	return 0
}

# rxe_kvfix_forget_record RELEASE: remove the kernel's record and log
rxe_kvfix_forget_record() {
	[[ -n $1 && $1 != */* && $1 != . && $1 != .. ]] || return 0
	rm -f "$(rxe_kvfix_state_dir)/status/$1" "$(rxe_kvfix_state_dir)/status/$1.log"
}
