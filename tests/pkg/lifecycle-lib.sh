# shellcheck shell=bash
# tests/pkg/lifecycle-lib.sh: one results line per step of the packages' life
# (install, upgrade, Release-only upgrade, reinstall, downgrade, remove, erase/purge),
# the same for apt/dpkg, rpm and dnf5. Sourced inside a build root (chroot or
# container) after tests/testlib.sh, by in-root-apt.sh and in-root-rpm.sh.
#
#   lc_init FAMILY REL:EXPECT...   the kernels (EXPECT: affected-* or unaffected/fixed)
#   lc_step STEP VERSION BUILDS -- CMD...
#       snapshot the kernels' records, run CMD (the package manager), then one line
#       "lifecycle FAMILY: STEP" that passes when: CMD exited 0; nothing is left
#       half-configured (dpkg --audit empty / rpm -V of our installed packages clean);
#       DKMS has exactly VERSION registered (- for none); for every kernel
#       `modinfo -k` resolves rdma_rxe to rxe-kvfix VERSION (affected kernels) or to
#       the in-tree module (the others, and every kernel when VERSION is -); and DKMS
#       built exactly BUILDS modules in the step (counted from the records
#       rxe-kvfix-dkms-build writes, /var/lib/rxe-kvfix/status/REL: a record replaced
#       with state=built is one build; a not-needed one is a classification, not a
#       build). The figures follow on an indented line.
#   lc_begin / lc_end STEP VERSION BUILDS RC OUTPUT: the same around a command the
#       caller runs itself
#   lc_units STEP WANT UNIT...    systemctl is-enabled of each UNIT is WANT
# Under Fedora's DKMS configuration (the Fedora-shaped root: post_transaction runs
# dracut, a counting stand-in there, tests/pkg/fedora-shape.sh), lc_end adds a line
# "lifecycle FAMILY: STEP: at most one initramfs regeneration" that passes when the
# step called dracut at most once; the count and the step's seconds follow.
# Results: testlib lines; LC_OUT holds the last CMD's output.

LC_FAMILY='' LC_OUT=''
LC_KERNELS=()

lc_init() {
	LC_FAMILY=$1
	shift
	LC_KERNELS=("$@")
}

# lc__stamp REL: the identity of REL's record (replaced, never edited: a new inode)
lc__stamp() { stat -c '%i %.9Y' "/var/lib/rxe-kvfix/status/$1" 2>/dev/null || echo none; }

# lc__registered: the versions DKMS has of rxe-kvfix, space-separated, or -
lc__registered() {
	local v
	v=$(dkms status -m rxe-kvfix 2>/dev/null | sed -n 's|^rxe-kvfix/\([^,:]*\)[,:].*|\1|p' | sort -u | tr '\n' ' ')
	v=${v% }
	echo "${v:--}"
}

# lc__resolves REL: "rxe-kvfix VERSION", "in-tree" or what modinfo said
lc__resolves() {
	local p v
	p=$(modinfo -k "$1" -n rdma_rxe 2>/dev/null) || {
		echo "nothing"
		return 0
	}
	if [[ $p == "/lib/modules/$1/kernel/"* ]]; then
		echo in-tree
	elif v=$(modinfo -F version "$p" 2>/dev/null) && [[ $v == *-rxe-kvfix ]]; then
		echo "rxe-kvfix ${v%-rxe-kvfix}"
	else
		echo "other:$p"
	fi
}

# lc__audit: what the package manager says is half-done, empty when nothing
lc__audit() {
	local p out
	case $LC_FAMILY in
	apt) dpkg --audit 2>&1 || true ;;
	*)
		for p in rxe-kvfix-dkms rxe-verify; do
			rpm -q "$p" >/dev/null 2>&1 || continue
			out=$(rpm -V "$p" 2>&1) || echo "rpm -V $p: $(tr '\n' ';' <<<"$out")"
		done
		;;
	esac
}

# lc_begin: the kernels' records before a step (lc_end checks after it)
declare -gA LC_BEFORE=()
LC_T0=0
# the dracut stand-in's log (Fedora-shaped root only) and its length at lc_begin
LC_DRACUT_LOG=/var/log/rxe-kvfix-dracut-calls.log LC_DRACUT0=-
lc__dracut_calls() { if [[ -f $LC_DRACUT_LOG ]]; then wc -l <"$LC_DRACUT_LOG"; else echo 0; fi; }
lc_begin() {
	local spec
	LC_DRACUT0=-
	! grep -qs 'counting stand-in' /usr/bin/dracut || LC_DRACUT0=$(lc__dracut_calls)
	LC_BEFORE=()
	for spec in "${LC_KERNELS[@]}"; do LC_BEFORE[${spec%%:*}]=$(lc__stamp "${spec%%:*}"); done
	LC_T0=$(date +%s.%N)
}

# lc_end STEP VERSION BUILDS RC OUTPUT: the step's line (RC, OUTPUT: the package
# manager's exit status and output)
lc_end() {
	local step=$1 want=$2 builds=$3 rc=$4 out=$5 k spec reg got audit bad='' built=0 classified=0 st
	t_start "lifecycle $LC_FAMILY: $step"
	# shellcheck disable=SC2034 # read by t_pass/t_fail (vmhost/common.sh)
	T_T0=$LC_T0 # the line's seconds: the step's, from lc_begin
	reg=$(lc__registered)
	audit=$(lc__audit)
	local figures="registered: $reg;"
	for spec in "${LC_KERNELS[@]}"; do
		k=${spec%%:*}
		got=$(lc__resolves "$k")
		figures+=" $k: $got;"
		if [[ $want != - && ${spec#*:} == affected-* ]]; then
			[[ $got == "rxe-kvfix $want" ]] || bad+=" $k resolves to '$got', not rxe-kvfix $want;"
		else
			[[ $got == in-tree ]] || bad+=" $k resolves to '$got', not the in-tree module;"
		fi
		if [[ $(lc__stamp "$k") != "${LC_BEFORE[$k]:-}" ]]; then
			# (no record any more after an erase: nothing was built)
			st=$(sed -n 's/^state=//p' "/var/lib/rxe-kvfix/status/$k" 2>/dev/null || true)
			case $st in built) built=$((built + 1)) ;; not-needed) classified=$((classified + 1)) ;; esac
		fi
	done
	((rc == 0)) || bad+=" the package manager exited $rc ($(tail -n 2 <<<"$out" | tr '\n' ' ' | cut -c1-200));"
	[[ $reg == "$want" ]] || bad+=" DKMS has '$reg' registered, not '$want';"
	[[ -z $audit ]] || bad+=" half-done: $(tr '\n' ' ' <<<"$audit" | cut -c1-200);"
	((built == builds)) || bad+=" $built builds, expected $builds;"
	if [[ -z $bad ]]; then t_pass; else t_fail "${bad# }"; fi
	echo "     $figures $built builds, $classified classified as not needing the fix"
	[[ $LC_DRACUT0 == - ]] || lc__regenerations "$step"
}

# lc__regenerations STEP: the line on the dracut calls since lc_begin (at most one)
lc__regenerations() {
	local n secs
	n=$(($(lc__dracut_calls) - LC_DRACUT0))
	secs=$(awk -v a="$LC_T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	t_start "lifecycle $LC_FAMILY: $1: at most one initramfs regeneration (Fedora's DKMS configuration, simulated)"
	# shellcheck disable=SC2034 # read by t_pass/t_fail (vmhost/common.sh)
	T_T0=$LC_T0
	if ((n <= 1)); then t_pass; else t_fail "$n initramfs regenerations (dracut called $n times)"; fi
	echo "     $n regenerations ($(tail -n "$n" "$LC_DRACUT_LOG" 2>/dev/null | cut -d' ' -f2- | sort | uniq -c | sed 's/^ *//' | tr '\n' ';')) in $secs s"
}

lc_step() {
	local step=$1 want=$2 builds=$3 rc=0
	shift 3
	[[ $1 == -- ]] && shift
	lc_begin
	LC_OUT=$("$@" 2>&1) || rc=$?
	printf '+ %s\n%s\n' "$*" "$LC_OUT" >>/tmp/lifecycle.log
	lc_end "$step" "$want" "$builds" "$rc" "$LC_OUT"
	return "$rc"
}

lc_units() {
	local step=$1 want=$2 u got bad=''
	shift 2
	t_start "lifecycle $LC_FAMILY: $step: $* $want"
	for u in "$@"; do
		got=$(systemctl is-enabled "$u" 2>&1 || true)
		[[ $got == "$want" ]] || bad+=" $u is '$got';"
	done
	if [[ -z $bad ]]; then t_pass; else t_fail "${bad# }"; fi
}
