#!/usr/bin/env bash
# configure-deps.sh: the first build a user types says what to install. CMake is run on
# this tree with its find root confined to a root without rxe-verify's libraries (a
# build root of the harness when there is one, a Debian root without any -dev package
# of ours; else an empty directory): the configure step must fail with one line that
# names each missing library and its Debian/Ubuntu and Fedora package
# (cmake/RxvDependencies.cmake). Run by ctest (tests/CMakeLists.txt), about 2 s.
set -euo pipefail

usage() { echo "Usage: tests/unit/configure-deps.sh SOURCE_DIR"; }
case ${1-} in -h | --help)
	usage
	exit 0
	;;
esac
[[ $# == 1 && -f $1/cmake/RxvDependencies.cmake ]] || {
	usage >&2
	exit 2
}
SRC=$1
W=$(mktemp -d "${TMPDIR:-/tmp}/rxv-configure-deps.XXXXXX")
trap 'rm -rf "$W"' EXIT

root=$(find /var/cache/rxe-kvfix/roots -mindepth 1 -maxdepth 1 -type d -name 'sid-*' -print -quit 2>/dev/null || true)
if [[ -z $root || -e $root/usr/include/nlohmann || -e $root/usr/include/CLI ]]; then
	root=$W/empty-root
	mkdir -p "$root"
fi
rc=0
cmake -S "$SRC" -B "$W/build" -DCMAKE_FIND_ROOT_PATH="$root" -DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=ONLY -DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER \
	-DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY \
	>"$W/out" 2>"$W/err" || rc=$?
line=$(grep -m1 '^rxe-verify: cannot build without' "$W/err" || true)
want='^rxe-verify: cannot build without nlohmann_json, CLI11, libibverbs, GoogleTest \(for the unit tests: -DRXV_BUILD_TESTS=OFF builds without them\); install them: Debian/Ubuntu: apt install nlohmann-json3-dev libcli11-dev libibverbs-dev libgtest-dev libgmock-dev; Fedora: dnf install json-devel cli11-devel rdma-core-devel gtest-devel gmock-devel$'
if ((rc != 0)) && [[ $line =~ $want ]] && ! grep -q 'Could not find a package configuration file' "$W/err"; then
	echo "ok   configure on a root without the libraries ($root): $line"
	exit 0
fi
echo "FAIL configure on a root without the libraries ($root): exit $rc; its first line: ${line:-none}; stderr: $(head -c 600 "$W/err")"
exit 1
