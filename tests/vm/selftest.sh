#!/usr/bin/env bash
# selftest.sh: fast checks of tests/vm (no network, no VM boot): argument errors,
# apt mirror parsing, matrix parsing, overlay mount/umount on a tiny lower dir, and
# a lint of tests/vm if shellcheck is installed. Ends with "N passed, N failed".
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

RXE_PROG=selftest
export RXE_PROG
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

usage() {
    echo "usage: tests/vm/selftest.sh   (no arguments; run as root for the overlay checks)"
}
case "${1:-}" in
-h | --help) usage; exit 0 ;;
"") ;;
*) usage >&2; exit 2 ;;
esac

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }
nok() { failed=$((failed + 1)); echo "FAIL $*"; }
# expect CODE DESCRIPTION CMD... : CMD exits CODE and prints one stderr line at least
expect() {
    local want=$1 what=$2 rc=0 err
    shift 2
    err=$("$@" 2>&1 >/dev/null) || rc=$?
    if [[ "$rc" == "$want" && -n "$err" ]]; then ok "$what"; else nok "$what (exit $rc, want $want: $err)"; fi
}

tmp=$(mktemp -d)
mnt=''
# shellcheck disable=SC2317
cleanup() {
    local rc=$?
    [[ -z "$mnt" ]] || (rxe_overlay_umount "$mnt") || true
    rm -rf --one-file-system "$tmp"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

V=$RXE_VM_DIR
expect 2 "mkroot without ROOT" "$V/mkroot"
expect 2 "mkroot unknown ROOT" "$V/mkroot" no-such-root
expect 2 "mkroot unknown option" "$V/mkroot" --bogus sid
expect 2 "vm-run without --kernel" "$V/vm-run" --root "$tmp" -- /bin/true
expect 2 "vm-run without command" "$V/vm-run" --kernel 1.0 --root "$tmp"
expect 2 "vm-run missing root" "$V/vm-run" --kernel 1.0 --root "$tmp/nope" -- /bin/true
expect 2 "vm-run missing vmlinuz" "$V/vm-run" --kernel 1.0 --root "$tmp" -- /bin/true
expect 2 "vm-run bad --mem" "$V/vm-run" --kernel 1.0 --root "$tmp" --mem lots -- /bin/true
expect 2 "overlay without command" "$V/overlay"
expect 2 "overlay unknown command" "$V/overlay" frob
expect 2 "smoke unknown kernel" "$V/smoke.sh" --kernel 0.0-none

# matrix parsing: every row has 5 fields, every root is trixie/sid-like, versions parse
rows=$(rxe_matrix_lines "" | wc -l)
if ((rows > 0)) && rxe_matrix_lines "" | awk 'NF != 5 { exit 1 }'; then ok "matrix has $rows rows of 5 fields"; else nok "matrix parsing"; fi
if rxe_matrix_row 7.2.13+deb14-amd64 >/dev/null; then ok "matrix row lookup"; else nok "matrix row lookup"; fi

# mirror parsing from deb822 and one-line sources (fake /etc/apt via a subshell)
mirror_test() {
    local d=$tmp/apt
    mkdir -p "$d/sources.list.d"
    cat >"$d/sources.list.d/a.sources" <<'EOF'
Types: deb
# comment URIs: http://wrong.example/debian
URIs: http://mirror.invalid/debian
Suites: bookworm
Components: main

Types: deb
URIs: http://mirror.invalid/debian-security/
Suites: bookworm-security
Components: main
EOF
    cat >"$d/sources.list.d/b.sources" <<'EOF'
Enabled: no
Types: deb
URIs: http://disabled.invalid/debian
Suites: bookworm
EOF
    echo 'deb [arch=amd64] http://oneline.invalid/debian bookworm main' >"$d/sources.list"
    (
        export RXE_KVFIX_APT_ETC=$d
        [[ "$(rxe_apt_mirror)" == http://mirror.invalid/debian &&
            "$(rxe_apt_security_mirror)" == http://mirror.invalid/debian-security &&
            "$(rxe__host_apt_uris | sort | tr '\n' ' ')" == "http://mirror.invalid/debian http://mirror.invalid/debian-security/ http://oneline.invalid/debian " ]]
    )
}
if mirror_test; then ok "mirror/security URI selection"; else nok "mirror/security URI selection"; fi
if [[ -n "$(rxe__host_apt_uris)" ]]; then ok "host apt URIs readable ($(rxe_apt_mirror))"; else nok "no URIs in the host's apt configuration"; fi

if [[ $(id -u) -eq 0 ]]; then
    mkdir -p "$tmp/lower/etc" "$tmp/lower/proc" "$tmp/lower/sys" "$tmp/lower/dev"
    echo base >"$tmp/lower/etc/x"
    mnt=$tmp/mnt
    rxe_overlay_mount "$tmp/lower" "$mnt"
    echo changed >"$mnt/etc/x"
    if [[ "$(cat "$tmp/lower/etc/x")" == base && -e "$mnt/proc/self" && -e "$mnt/dev/null" ]]; then
        ok "overlay writes go to the upper layer; proc/dev mounted"
    else
        nok "overlay mount"
    fi
    rxe_overlay_umount "$mnt"
    if [[ -z "$(rxe_mounted_under "$mnt")" ]]; then ok "overlay umount leaves nothing mounted"; else nok "overlay umount"; fi
    mnt=''
    rc=0
    # shellcheck disable=SC2016
    "$V/overlay" run "$tmp/lower" -- sh -c 'test -e "$RXE_KVFIX_OVERLAY/etc/x" && exit 7' || rc=$?
    if ((rc == 7)) && ! grep -q "$tmp" /proc/self/mountinfo; then ok "overlay run propagates status, unmounts"; else nok "overlay run (rc $rc)"; fi
else
    echo "skip overlay checks (not root)"
fi

if command -v shellcheck >/dev/null 2>&1; then
    if (cd "$RXE_REPO_DIR" && shellcheck -x tests/vm/mkroot tests/vm/overlay tests/vm/vm-run tests/vm/*.sh); then
        ok "shellcheck tests/vm"
    else
        nok "shellcheck tests/vm"
    fi
fi

echo "selftest: $passed passed, $failed failed"
((failed == 0))
