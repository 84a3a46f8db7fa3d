#!/usr/bin/env bash
# smoke.sh: end-to-end check of the VM test infrastructure: cached root, overlay,
# QEMU boot, rdma_rxe on a dummy netdev, loopback RDMA traffic, clean kernel log.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

RXE_PROG=smoke
export RXE_PROG
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

DEFAULT_KERNELS=(7.2.13+deb14-amd64 6.12.113+deb13-amd64)

usage() {
    cat <<EOF
usage: tests/vm/smoke.sh [--kernel REL]... [--all] [--out DIR] [--timeout SECS] [--verbose]

For each kernel (default: ${DEFAULT_KERNELS[*]}): build or reuse its root
(tests/vm/mkroot, root column of kmod/kernels.tsv), mount a throw-away overlay, boot
it with tests/vm/vm-run and run tests/vm/smoke-guest.sh: rdma_rxe + rxe0 on a dummy
netdev, ibv_devices, ibv_devinfo, loopback ibv_rc_pingpong and ib_write_bw, rdma link
del. The host then checks the exit status and that dmesg has no WARNING:/BUG:/Oops.

  --kernel REL    smoke-test this kernel (repeatable)
  --all           every kernel of kmod/kernels.tsv
  --out DIR       keep results under DIR/<REL>/ (default: a temp dir, kept on failure)
  --timeout SECS  per-VM timeout (default 600)
  --verbose       show guest consoles on stderr
Exit: 0 if all passed, 1 if any failed, 2 bad arguments.
EOF
}

kernels=() out='' timeout=600 verbose=()
while (($#)); do
    case "$1" in
    --kernel)
        (($# >= 2)) || { echo "smoke: --kernel needs a release" >&2; exit 2; }
        kernels+=("$2"); shift 2 ;;
    --all) mapfile -t -O "${#kernels[@]}" kernels < <(rxe_matrix_lines "" | awk '{print $1}'); shift ;;
    --out)
        (($# >= 2)) || { echo "smoke: --out needs a directory" >&2; exit 2; }
        out=$2; shift 2 ;;
    --timeout)
        if (($# < 2)) || [[ ! "$2" =~ ^[1-9][0-9]*$ ]]; then
            echo "smoke: --timeout needs a number of seconds" >&2
            exit 2
        fi
        timeout=$2; shift 2 ;;
    --verbose) verbose=(--verbose); shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "smoke: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
((${#kernels[@]})) || kernels=("${DEFAULT_KERNELS[@]}")
for k in "${kernels[@]}"; do
    rxe_matrix_row "$k" >/dev/null || { echo "smoke: kernel $k is not in $(rxe_matrix_file); pick a release from its first column" >&2; exit 2; }
done
[[ $(id -u) -eq 0 ]] || { echo "smoke: needs root (mkroot, overlay mounts); run as root" >&2; exit 2; }

keep=1
if [[ -z "$out" ]]; then
    out=$(mktemp -d /var/tmp/rxe-kvfix-smoke.XXXXXX)
    keep=0
fi
mkdir -p "$out"
mnt=''
# shellcheck disable=SC2317
cleanup() {
    local rc=$?
    if [[ -n "$mnt" ]]; then
        (rxe_overlay_umount "$mnt") || rc=125
        rmdir "$mnt" 2>/dev/null || true
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

passed=0 failed=0
summary=()
for k in "${kernels[@]}"; do
    read -r _ _ rootname _ _ < <(rxe_matrix_row "$k")
    t0=$(date +%s)
    rootdir=$("$RXE_VM_DIR/mkroot" "$rootname" | tail -n1)
    t1=$(date +%s)
    mnt=$(mktemp -d /var/tmp/rxe-kvfix-smokeroot.XXXXXX)
    rxe_overlay_mount --no-api "$rootdir" "$mnt"
    kout=$out/$k
    rc=0
    "$RXE_VM_DIR/vm-run" --kernel "$k" --root "$mnt" --out "$kout" --timeout "$timeout" \
        "${verbose[@]}" -- "$RXE_VM_DIR/smoke-guest.sh" || rc=$?
    rxe_overlay_umount "$mnt"
    rmdir "$mnt"
    mnt=''
    t2=$(date +%s)
    why=''
    if ((rc != 0)); then
        why="guest exit status $rc"
    elif [[ ! -s "$kout/dmesg.txt" ]]; then
        why="no dmesg.txt in $kout"
    elif grep -qE 'WARNING:|BUG:|Oops' "$kout/dmesg.txt"; then
        why="dmesg has $(grep -m1 -E 'WARNING:|BUG:|Oops' "$kout/dmesg.txt")"
    elif ! grep -q '^SMOKE PASS' "$kout/output.log"; then
        why="no SMOKE PASS in output.log"
    fi
    boot=$(sed -n 's/^guest_uptime_at_init=//p' "$kout/vm-run.info" 2>/dev/null || echo '?')
    wall=$(sed -n 's/^wall_seconds=//p' "$kout/vm-run.info" 2>/dev/null || echo '?')
    timing="root $((t1 - t0))s, guest init at ${boot}s uptime, VM wall ${wall}s, total $((t2 - t0))s"
    if [[ -z "$why" ]]; then
        passed=$((passed + 1))
        summary+=("PASS $k ($timing)")
    else
        failed=$((failed + 1))
        keep=1
        summary+=("FAIL $k: $why ($timing; see $kout)")
    fi
    rxe_log "${summary[-1]}"
done

printf '%s\n' "${summary[@]}"
if ((keep)); then
    echo "results kept in $out"
else
    rm -rf "$out"
fi
echo "smoke: $passed passed, $failed failed"
((failed == 0))
