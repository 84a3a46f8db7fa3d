#!/bin/sh
# rxe-kvfix guest-side helpers for Soft-RoCE (rdma_rxe) tests. Source it inside a VM
# started by tests/vm/vm-run (POSIX sh; works from sh and bash):
#     . "$RXE_KVFIX_GUEST_LIB"        # = /run/rxe-kvfix/ctl/guest-lib.sh
# The 10.77.x.0/24 addresses used here exist only inside the guest.
#
#   rxe_fail MSG...                 print "FAIL: MSG" to stderr and exit 1
#   rxe_require_rxe                 modprobe rdma_rxe + ib_uverbs, fail loudly if not loaded;
#                                   prints the module file in use
#   rxe_module_file [MOD]           file modprobe uses for MOD (default rdma_rxe)
#   rxe_dummy_up [RXE NETDEV CIDR]  dummy netdev (default d0, 10.77.0.1/24) + rxe link
#                                   (default rxe0); waits for its RoCEv2 IPv4 GID
#   rxe_dummy_down [RXE NETDEV]     delete that rxe link and dummy netdev
#   rxe_veth_up [NSA NSB NET]       namespaces NSA/NSB (default rxa/rxb) joined by veth
#                                   va/vb with 10.77.NET.1/24 and .2/24 (NET default 1),
#                                   rxe devices rxe_NSA / rxe_NSB created in each namespace
#   rxe_veth_down [NSA NSB]         delete those rxe links, veths and namespaces
#   rxe_teardown_all                delete every rxe link, the namespaces and dummies
#                                   made by this library
#   rxe_gid_index RXE [IPV4]        index of the RoCEv2 GID of RXE (for IPV4, or any IPv4)
#   rxe_wait_gid RXE [IPV4]         wait up to 10 s for that GID, fail if it never shows
#   rxe_pingpong_loopback RXE       ibv_rc_pingpong server+client on one device
#   rxe_write_bw_loopback RXE [SIZE [ITERS]]
#                                   ib_write_bw server+client on one device (default 64K x 100)
#   rxe_check_dmesg                 fail if the kernel log has WARNING:/BUG:/Oops/Call Trace
# shellcheck disable=SC3043

RXE_KVFIX_STATE=${RXE_KVFIX_STATE:-/run/rxe-kvfix-guest}

rxe_fail() {
    echo "FAIL: $*" >&2
    exit 1
}

rxe_log() { echo "rxe: $*" >&2; }

# shellcheck disable=SC2120
rxe_module_file() { modinfo -n "${1:-rdma_rxe}" 2>/dev/null; }

rxe_require_rxe() {
    modprobe rdma_rxe || rxe_fail "modprobe rdma_rxe failed (module file: $(rxe_module_file || echo none))"
    [ -d /sys/module/rdma_rxe ] || rxe_fail "rdma_rxe did not load (no /sys/module/rdma_rxe)"
    modprobe ib_uverbs || rxe_fail "modprobe ib_uverbs failed"
    rxe_log "rdma_rxe loaded from $(rxe_module_file)"
}

rxe__note() {
    mkdir -p "$RXE_KVFIX_STATE"
    echo "$2" >>"$RXE_KVFIX_STATE/$1"
}

rxe_gid_index() {
    local dev="$1" want="${2:-}" d g n hex
    d=/sys/class/infiniband/$dev/ports/1
    [ -d "$d/gids" ] || return 1
    if [ -n "$want" ]; then
        # 10.77.0.1 -> 0a4d:0001
        hex=$(echo "$want" | awk -F. '{ printf "%02x%02x:%02x%02x", $1, $2, $3, $4 }')
    fi
    for g in "$d"/gids/*; do
        n=${g##*/}
        case "$(cat "$g" 2>/dev/null)" in
        0000:0000:0000:0000:0000:ffff:*) ;;
        *) continue ;;
        esac
        [ "$(cat "$d/gid_attrs/types/$n" 2>/dev/null)" = "RoCE v2" ] || continue
        if [ -n "$want" ]; then
            [ "$(cut -d: -f7,8 "$g")" = "$hex" ] || continue
        fi
        echo "$n"
        return 0
    done
    return 1
}

rxe_wait_gid() {
    local i=0
    while [ $i -lt 50 ]; do
        rxe_gid_index "$@" >/dev/null && return 0
        sleep 0.2
        i=$((i + 1))
    done
    rxe_fail "no RoCEv2 IPv4 GID on $1 after 10 s ($(cat /sys/class/infiniband/"$1"/ports/1/gids/* 2>/dev/null | sort -u | tr '\n' ' '))"
}

rxe_dummy_up() {
    local rxe="${1:-rxe0}" nd="${2:-d0}" cidr="${3:-10.77.0.1/24}"
    modprobe dummy numdummies=0 || rxe_fail "modprobe dummy failed"
    ip link add "$nd" type dummy || rxe_fail "ip link add $nd type dummy failed"
    rxe__note dummies "$nd"
    ip addr add "$cidr" dev "$nd" || rxe_fail "ip addr add $cidr dev $nd failed"
    ip link set "$nd" up || rxe_fail "ip link set $nd up failed"
    rdma link add "$rxe" type rxe netdev "$nd" || rxe_fail "rdma link add $rxe type rxe netdev $nd failed"
    rxe_wait_gid "$rxe" "${cidr%/*}"
    rxe_log "$rxe up on dummy $nd ($cidr, gid index $(rxe_gid_index "$rxe" "${cidr%/*}"))"
}

rxe_dummy_down() {
    local rxe="${1:-rxe0}" nd="${2:-d0}"
    rdma link del "$rxe" || rxe_fail "rdma link del $rxe failed"
    ip link del "$nd" || rxe_fail "ip link del $nd failed"
}

rxe_veth_up() {
    local a="${1:-rxa}" b="${2:-rxb}" net="${3:-1}"
    modprobe veth || rxe_fail "modprobe veth failed"
    ip netns add "$a" || rxe_fail "ip netns add $a failed"
    rxe__note netns "$a"
    ip netns add "$b" || rxe_fail "ip netns add $b failed"
    rxe__note netns "$b"
    ip link add va netns "$a" type veth peer name vb netns "$b" || rxe_fail "veth pair va/vb failed"
    ip -n "$a" addr add "10.77.$net.1/24" dev va || rxe_fail "address on va failed"
    ip -n "$b" addr add "10.77.$net.2/24" dev vb || rxe_fail "address on vb failed"
    ip -n "$a" link set lo up || rxe_fail "lo up in $a failed"
    ip -n "$a" link set va up || rxe_fail "va up in $a failed"
    ip -n "$b" link set lo up || rxe_fail "lo up in $b failed"
    ip -n "$b" link set vb up || rxe_fail "vb up in $b failed"
    ip netns exec "$a" rdma link add "rxe_$a" type rxe netdev va || rxe_fail "rdma link add rxe_$a failed"
    ip netns exec "$b" rdma link add "rxe_$b" type rxe netdev vb || rxe_fail "rdma link add rxe_$b failed"
    rxe_wait_gid "rxe_$a" "10.77.$net.1"
    rxe_wait_gid "rxe_$b" "10.77.$net.2"
    rxe_log "rxe_$a (10.77.$net.1 in netns $a) and rxe_$b (10.77.$net.2 in netns $b) up"
}

rxe_veth_down() {
    local a="${1:-rxa}" b="${2:-rxb}"
    rdma link del "rxe_$a" || rxe_fail "rdma link del rxe_$a failed"
    rdma link del "rxe_$b" || rxe_fail "rdma link del rxe_$b failed"
    ip netns del "$a" || rxe_fail "ip netns del $a failed"
    ip netns del "$b" || rxe_fail "ip netns del $b failed"
}

rxe_teardown_all() {
    local l n
    for l in $(rdma link show 2>/dev/null | awk '$1 == "link" { sub("/.*", "", $2); print $2 }' | sort -u); do
        rdma link del "$l" 2>/dev/null || true
    done
    [ ! -f "$RXE_KVFIX_STATE/netns" ] || while read -r n; do
        ip netns del "$n" 2>/dev/null || true
    done <"$RXE_KVFIX_STATE/netns"
    [ ! -f "$RXE_KVFIX_STATE/dummies" ] || while read -r n; do
        ip link del "$n" 2>/dev/null || true
    done <"$RXE_KVFIX_STATE/dummies"
    rm -f "$RXE_KVFIX_STATE/netns" "$RXE_KVFIX_STATE/dummies"
}

rxe_pingpong_loopback() {
    local dev="${1:-rxe0}" gid spid rc=0
    gid=$(rxe_gid_index "$dev") || rxe_fail "no RoCEv2 IPv4 GID on $dev"
    timeout 60 ibv_rc_pingpong -d "$dev" -g "$gid" -n 100 >/tmp/pingpong-server.log 2>&1 &
    spid=$!
    sleep 1
    timeout 60 ibv_rc_pingpong -d "$dev" -g "$gid" -n 100 127.0.0.1 || rc=$?
    wait "$spid" || rc=$((rc ? rc : $?))
    cat /tmp/pingpong-server.log >&2
    [ "$rc" -eq 0 ] || rxe_fail "ibv_rc_pingpong loopback on $dev failed ($rc)"
}

rxe_write_bw_loopback() {
    local dev="${1:-rxe0}" size="${2:-65536}" iters="${3:-100}" gid spid rc=0
    gid=$(rxe_gid_index "$dev") || rxe_fail "no RoCEv2 IPv4 GID on $dev"
    timeout 120 ib_write_bw -d "$dev" -x "$gid" -s "$size" -n "$iters" -F >/tmp/write-bw-server.log 2>&1 &
    spid=$!
    sleep 1
    timeout 120 ib_write_bw -d "$dev" -x "$gid" -s "$size" -n "$iters" -F 127.0.0.1 || rc=$?
    wait "$spid" || rc=$((rc ? rc : $?))
    [ "$rc" -eq 0 ] || { cat /tmp/write-bw-server.log >&2; rxe_fail "ib_write_bw loopback on $dev failed ($rc)"; }
}

rxe_check_dmesg() {
    local hits
    hits=$(dmesg | grep -E 'WARNING:|BUG:|Oops|Call Trace' || true)
    [ -z "$hits" ] || rxe_fail "kernel log has warnings/oopses: $(echo "$hits" | head -n 5)"
}
