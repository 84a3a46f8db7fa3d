# shellcheck shell=bash
# tests/testlib.sh: result recording shared by rxe-kvfix's shell tests.
# Sourced. Every test ends in exactly one of t_pass, t_fail or t_skip; results
# go to stdout as one line each and, when RXE_RESULTS is set, are appended to
# that file as TSV (status, suite, name, seconds, reason) for tests/run-all.
#
#   t_suite NAME          the suite the following results belong to
#   t_start NAME          remember the start time of NAME
#   t_pass [NAME]         ok NAME
#   t_fail [NAME] REASON  FAIL NAME: REASON
#   t_skip [NAME] REASON  SKIP NAME: REASON   (REASON must say what the machine lacks)
#   t_check NAME CMD...   t_pass if CMD succeeds, else t_fail with its last output line

T_SUITE=${T_SUITE:-tests}
T_NAME=''
T_T0=0
T_FAILS=0

t_suite() { T_SUITE=$1; }
t_start() { T_NAME=$1; T_T0=$(date +%s.%N); }

t__record() { # STATUS NAME REASON
	local secs
	secs=$(awk -v a="$T_T0" -v b="$(date +%s.%N)" 'BEGIN { if (a > 0) printf "%.1f", b - a; else printf "0.0" }')
	case $1 in
	ok) printf 'ok   %s (%ss)\n' "$2" "$secs" ;;
	FAIL) printf 'FAIL %s: %s (%ss)\n' "$2" "$3" "$secs"; T_FAILS=$((T_FAILS + 1)) ;;
	SKIP) printf 'SKIP %s: %s\n' "$2" "$3" ;;
	esac
	if [[ -n ${RXE_RESULTS:-} ]]; then
		printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$T_SUITE" "$2" "$secs" "${3//$'\t'/ }" >>"$RXE_RESULTS"
	fi
	T_T0=0
}

t_pass() { t__record ok "${1:-$T_NAME}" ""; }
t_fail() {
	if (($# >= 2)); then t__record FAIL "$1" "$2"; else t__record FAIL "$T_NAME" "$1"; fi
}
t_skip() {
	if (($# >= 2)); then t__record SKIP "$1" "$2"; else t__record SKIP "$T_NAME" "$1"; fi
}

t_check() { # NAME CMD...
	local name=$1 out
	shift
	[[ $T_T0 != 0 ]] || t_start "$name"
	if out=$("$@" 2>&1); then
		t_pass "$name"
	else
		t_fail "$name" "$(tail -n 3 <<<"$out" | tr '\n' ' ' | cut -c1-400)"
	fi
}

# --- the harness configuration (tests/harness.conf) ------------------------------
#   t_config_load [--config FILE | --set KEY=VALUE]...
#                         read tests/harness.conf, then tests/harness.local.conf, then
#                         each --config FILE and --set in order; export every key as
#                         RXE_<KEY> (upper case). Run under a harness script that has
#                         already loaded it (RXE_CONFIG_LOADED=1 in the environment), the
#                         exported values are the starting point instead of the files.
#                         A malformed line or an unknown key: one line, exit 2.
T_CONFIG_FILE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/harness.conf
declare -gA T_CFG=()

t__config_bad() { printf '%s: %s\n' "${RXE_PROG:-harness}" "$*" >&2; exit 2; }

t__config_put() { # ORIGIN KEY VALUE
	[[ -v T_CFG[$2] ]] || t__config_bad "$1: unknown setting '$2'; use a key of tests/harness.conf"
	T_CFG[$2]=$3
}

t__config_read() { # FILE DEFINE(0|1)
	local file=$1 define=$2 line n=0
	[[ -r $file ]] || t__config_bad "config file $file is not there or not readable; pass an existing file to --config"
	while IFS= read -r line || [[ -n $line ]]; do
		n=$((n + 1))
		[[ $line =~ ^[[:space:]]*(#.*)?$ ]] && continue
		[[ $line =~ ^([a-z][a-z0-9_]*)=(.*)$ ]] || t__config_bad "$file:$n: '$line' is not KEY=VALUE; write one KEY=VALUE per line"
		if ((define)); then
			T_CFG[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
		else
			t__config_put "$file:$n" "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
		fi
	done <"$file"
}

t_config_load() {
	local k var
	t__config_read "$T_CONFIG_FILE" 1
	if [[ ${RXE_CONFIG_LOADED:-} == 1 ]]; then
		for k in "${!T_CFG[@]}"; do
			var=RXE_${k^^}
			[[ ! -v $var ]] || T_CFG[$k]=${!var}
		done
	elif [[ -f ${T_CONFIG_FILE%.conf}.local.conf ]]; then
		t__config_read "${T_CONFIG_FILE%.conf}.local.conf" 0
	fi
	while (($#)); do
		case $1 in
		--config) t__config_read "$2" 0 ;;
		--set)
			[[ $2 =~ ^([a-z][a-z0-9_]*)=(.*)$ ]] || t__config_bad "--set '$2': pass --set KEY=VALUE"
			t__config_put "--set" "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
			;;
		*) t__config_bad "t_config_load: unexpected argument '$1'" ;;
		esac
		shift 2
	done
	for k in "${!T_CFG[@]}"; do
		export "RXE_${k^^}=${T_CFG[$k]}"
	done
	export RXE_CONFIG_LOADED=1
}

# t_config_arg OPT VALUE: for an option parser; appends "OPT VALUE" to T_CONFIG_ARGS
# after checking that VALUE is there (exit 2 otherwise).
T_CONFIG_ARGS=()
t_config_arg() {
	[[ -n ${2+x} ]] || t__config_bad "$1 needs a value (--config FILE, --set KEY=VALUE)"
	T_CONFIG_ARGS+=("$1" "$2")
}

# --- ccache (setting ccache) ----------------------------------------------------------
#   t_ccache_on           status 0 when the setting ccache is 1 and ccache is installed
#   t_ccache_stats        "HITS MISSES" of the cache in $CCACHE_DIR so far
#   t_ccache_begin        remember them before a build (the cache $CCACHE_DIR)
#   t_ccache_end          append "(ccache: N hits, M compiled)" to the current test's
#                         name; nothing when t_ccache_begin was not called
#   t_ccache_use BASEDIR  the one set-up of every build through ccache: export CCACHE_DIR
#                         (<cache>/ccache), CCACHE_BASEDIR=BASEDIR (paths below it hashed
#                         relative, so another clone hits), CCACHE_NOHASHDIR=1; set
#                         T_CCACHE_CMAKE to CMake's launcher arguments; t_ccache_begin
t_ccache_on() { [[ ${RXE_CCACHE:-1} == 1 ]] && command -v ccache >/dev/null; }
t_ccache_stats() {
	ccache --print-stats 2>/dev/null | awk -F'\t' '$1 ~ /^(direct|preprocessed)_cache_hit$/ {h += $2} $1 == "cache_miss" {m = $2} END {print h + 0, m + 0}'
}
T_CCACHE0=''
t_ccache_begin() { T_CCACHE0=$(t_ccache_stats); }
t_ccache_use() {
	export CCACHE_DIR=${RXE_CACHE:-/var/cache/rxe-kvfix}/ccache CCACHE_BASEDIR=$1 CCACHE_NOHASHDIR=1
	# shellcheck disable=SC2034  # read by the callers
	T_CCACHE_CMAKE=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
	t_ccache_begin
}
t_ccache_end() {
	[[ -n $T_CCACHE0 ]] || return 0
	local h0 m0 h1 m1
	read -r h0 m0 <<<"$T_CCACHE0"
	read -r h1 m1 < <(t_ccache_stats)
	T_NAME+=" (ccache: $((h1 - h0)) hits, $((m1 - m0)) compiled)"
	T_CCACHE0=''
}
