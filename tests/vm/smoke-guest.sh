#!/usr/bin/env bash
# Guest side of tests/vm/smoke.sh: rdma_rxe on a dummy netdev, device listing,
# loopback ibv_rc_pingpong and ib_write_bw, teardown, clean kernel log.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
# shellcheck source=guest-lib.sh
. "${RXE_KVFIX_GUEST_LIB:?run this inside tests/vm/vm-run}"

echo "smoke: kernel $(uname -r)"
rxe_require_rxe
rxe_dummy_up rxe0 d0 10.77.0.1/24
ibv_devices
ibv_devinfo -d rxe0
rxe_pingpong_loopback rxe0
rxe_write_bw_loopback rxe0 65536 100
rxe_dummy_down rxe0 d0
[[ ! -e /sys/class/infiniband/rxe0 ]] || rxe_fail "rxe0 still present after rdma link del"
rxe_check_dmesg
echo "SMOKE PASS"
