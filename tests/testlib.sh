# shellcheck shell=bash
# tests/testlib.sh: the test stages' library. Sourced. The script opening (rxe_on_exit)
# and the result functions (t_suite, t_start, t_pass, t_fail, t_skip, t_check) are
# vmhost/common.sh's, shared with vmhost and the guests; this file adds the harness
# configuration and the ccache counters.

# shellcheck source=vmhost/common.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/vmhost/common.sh"

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

t__config_bad() {
	printf '%s: %s\n' "${RXE_PROG:-harness}" "$*" >&2
	exit 2
}

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

# t_kbuild_ccache_report begin|end: a stage's use of <cache>/ccache-kbuild (the caller
# also sources vmhost/lib.sh, for rxe_cache_dir: checked). begin remembers its hits and misses
# (t_ccache_stats); end prints the stage's line "kbuild through ccache ...: N hits, M
# compiled".
T_KBUILD_CCACHE0=''
t_kbuild_ccache_report() {
	local d h=0 m=0 h0 m0
	declare -F rxe_cache_dir >/dev/null || {
		echo "t_kbuild_ccache_report: source vmhost/lib.sh first (rxe_cache_dir)" >&2
		return 2
	}
	d=$(rxe_cache_dir)/ccache-kbuild
	if [[ -d $d ]] && command -v ccache >/dev/null; then read -r h m < <(CCACHE_DIR=$d t_ccache_stats); fi
	if [[ $1 == begin ]]; then
		T_KBUILD_CCACHE0="$h $m"
		return 0
	fi
	read -r h0 m0 <<<"${T_KBUILD_CCACHE0:-$h $m}"
	echo "--- kbuild through ccache in the build roots, during this stage (and anything beside it): $((h - h0)) hits, $((m - m0)) compiled"
}

# --- a Fedora-shaped kernel source RPM (the SRPM provider's tests) -----------------
# t_fedora_srpm TARBALL UPSTREAM DIR MARKER TAG SUMMARY: a kernel source RPM in
# Fedora's shape, kernel-UPSTREAM-200.fc44.src.rpm, made in DIR; its path on stdout.
# Source0 is linux-UPSTREAM.tar.xz (TARBALL, a Debian linux-source, trimmed to the top
# Makefile and the rxe directory: the whole tree costs minutes), Patch1
# patch-X.Y-redhat.patch with one change inside rxe (the comment MARKER in rxe_verbs.c,
# which the SRPM provider applies) and one outside (EXTRAVERSION = -TAG, left out), as
# Fedora's patch touches both. Used by the kmod and pkg test stages (tests/kmod/srpm-provider.sh,
# tests/pkg/fedora-shape.sh).
t_fedora_srpm() {
	local src=$1 up=$2 d=$3 marker=$4 tag=$5 summary=$6 xy rxedir=drivers/infiniband/sw/rxe
	xy=$(cut -d. -f1,2 <<<"$up")
	mkdir -p "$d/x" "$d/rpm/SOURCES" "$d/rpm/SPECS"
	tar -xf "$src" -C "$d/x" --strip-components=1 --wildcards --no-wildcards-match-slash "*/$rxedir/*" "*/Makefile"
	mv "$d/x" "$d/linux-$up"
	tar -C "$d" -cJf "$d/rpm/SOURCES/linux-$up.tar.xz" "linux-$up"
	cp -a "$d/linux-$up" "$d/b"
	sed -i "1a /* $marker */" "$d/b/$rxedir/rxe_verbs.c"
	sed -i -E "s/^EXTRAVERSION =.*/EXTRAVERSION = -$tag/" "$d/b/Makefile"
	(
		cd "$d" && { diff -u --label "a/$rxedir/rxe_verbs.c" --label "b/$rxedir/rxe_verbs.c" "linux-$up/$rxedir/rxe_verbs.c" "b/$rxedir/rxe_verbs.c" || true; } |
			sed "1i diff --git a/$rxedir/rxe_verbs.c b/$rxedir/rxe_verbs.c" >"rpm/SOURCES/patch-$xy-redhat.patch"
		{ diff -u --label a/Makefile --label b/Makefile "linux-$up/Makefile" b/Makefile || true; } |
			sed '1i diff --git a/Makefile b/Makefile' >>"rpm/SOURCES/patch-$xy-redhat.patch"
	)
	cat >"$d/rpm/SPECS/kernel.spec" <<SPEC
Name: kernel
Version: $up
Release: 200.fc44
Summary: $summary
License: GPL-2.0-only
Source0: linux-$up.tar.xz
Patch1: patch-$xy-redhat.patch
%description
Made at test time by rxe-kvfix's tests from Debian's linux-source of linux $up,
trimmed to the top Makefile and $rxedir.
SPEC
	rpmbuild -bs --define "_topdir $d/rpm" "$d/rpm/SPECS/kernel.spec" >"$d/rpmbuild.log" 2>&1 ||
		{
			echo "rpmbuild -bs of kernel-$up failed: $(tail -n1 "$d/rpmbuild.log")" >&2
			return 1
		}
	find "$d/rpm/SRPMS" -name "kernel-$up-200.fc44*.src.rpm" | head -n1
}

# --- a kernel "installed from a Debian package", without its source --------------
# t_fake_headers_deb RELEASE VERSION: installs an empty linux-headers-RELEASE of
# VERSION (made here with dpkg-deb), which is all rxe-kvfix-prepare reads to learn a
# Debian kernel's package version (the kmod stage's fetch cases). Remove it with
# dpkg -P linux-headers-RELEASE.
t_fake_headers_deb() {
	local d
	d=$(mktemp -d /tmp/rxe-fakehdr.XXXXXX)
	mkdir -p "$d/pkg/DEBIAN"
	printf 'Package: linux-headers-%s\nVersion: %s\nArchitecture: all\nMaintainer: rxe-kvfix tests <root@localhost>\nDescription: rxe-kvfix test: a kernel without its source here\n' \
		"$1" "$2" >"$d/pkg/DEBIAN/control"
	dpkg-deb -b "$d/pkg" "$d/h.deb" >/dev/null && dpkg -i "$d/h.deb" >/dev/null
	rm -rf "$d"
}

# --- a host test's start ----------------------------------------------------------
# t_no_args USAGE "$@": a test that takes no arguments: -h or --help prints USAGE and
# exits 0; any other argument prints it to stderr and exits 2
t_no_args() {
	local u=$1
	shift
	if [[ ${1:-} == -h || ${1:-} == --help ]]; then
		echo "$u"
		exit 0
	fi
	(($# == 0)) || {
		echo "$u" >&2
		exit 2
	}
}
# t_workdir NAME: W, a new temporary directory, removed on exit (a signal included)
# after the background jobs still running are killed
t_workdir() {
	W=$(mktemp -d "${TMPDIR:-/tmp}/rxe-kvfix-$1.XXXXXX")
	rxe_on_exit t_workdir_cleanup
}
# shellcheck disable=SC2317  # invoked by trap
t_workdir_cleanup() {
	local p
	for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done
	rm -rf "$W"
}

# --- another Debian suite for a build root's apt ---------------------------------
# t_apt_add_suite ROOT SUITE NAME: SUITE, from the mirror ROOT's apt already uses
# (vmhost/mkroot's rxe-kvfix.sources), made known to ROOT's apt as NAME.sources and
# pinned like mkroot's other suites: only what is asked for by name comes from it.
# ROOT is "" inside the root itself. Nothing is written when SUITE is there already.
t_apt_add_suite() {
	local root=$1 suite=$2 name=$3 src=$1/etc/apt/sources.list.d/rxe-kvfix.sources
	! grep -qE "^Suites:.*[[:space:]]$suite([[:space:]]|$)" "$src" || return 0
	printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
		"$(sed -n 's/^URIs: //p' "$src" | head -n1)" "$suite" >"$root/etc/apt/sources.list.d/$name.sources"
	printf 'Package: *\nPin: release n=%s\nPin-Priority: 100\n' "$suite" >"$root/etc/apt/preferences.d/$name.pref"
}

# --- the arguments of a host test over one kernel's rxe part ----------------------
#   t_rxe_tree_args SCRIPT "$@"   (tests/kmod/memo-test.sh, tests/kmod/admin-test.sh)
#                         RXE_TREE KERNELRELEASE: --help prints the usage and exits 0;
#                         anything but a directory with a Makefile and
#                         drivers/infiniband/sw/rxe/rxe_mr.c, and a release, prints it
#                         and exits 2. Sets TREE and K.
t_rxe_tree_args() {
	local script=$1 use
	shift
	use="Usage: $script RXE_TREE KERNELRELEASE   (RXE_TREE: a Makefile and drivers/infiniband/sw/rxe)"
	case ${1-} in -h | --help)
		echo "$use"
		exit 0
		;;
	esac
	[[ $# == 2 && -f $1/Makefile && -f $1/drivers/infiniband/sw/rxe/rxe_mr.c ]] || {
		echo "$use" >&2
		exit 2
	}
	# shellcheck disable=SC2034 # read by the script
	TREE=$1 K=$2
}
