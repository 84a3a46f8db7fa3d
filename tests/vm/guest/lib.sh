# shellcheck shell=bash
# tests/vm/guest/lib.sh: what only the scenarios' guest scripts use, on top of the
# guest library of the test host (vmhost/guest/lib.sh, sourced first: paths,
# results, rxe devices on dummy netdevs, the stock module, rxe_flavor, jget). The
# guest scripts of tests/vm/guest source this file instead of that one:
#     . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# Defines:
#
#   rxe_module_file [MOD]           file modprobe uses for MOD (default rdma_rxe)
#   load_phase K PHASE WHAT         one result "K WHAT PHASE: ... loads": stock (load_stock)
#                                   or fixed (modprobe gives rxe-kvfix); status 1 if not
#   unload_phase K PHASE WHAT       rmmod rdma_rxe as a result; after fixed, dmesg clean
#   rxe_veth_up [NSA NSB NET]       namespaces NSA/NSB (default rxa/rxb) joined by veth
#                                   va/vb with 10.77.NET.1/24 and .2/24 (NET default 1),
#                                   rxe devices rxe_NSA / rxe_NSB created in each namespace
#   rxe_veth_down [NSA NSB]         delete those rxe links, veths and namespaces
#   rxe_teardown_all                delete every rxe link, the namespaces and dummies
#                                   made by either library (listed in $GUEST_STATE)
#   rxe_frag_start, rxe_frag_topup, rxe_frag_stop
#                                   the memory fragmenter (below)

# shellcheck source=vmhost/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../../vmhost/guest/lib.sh"

# shellcheck disable=SC2120
rxe_module_file() { modinfo -n "${1:-rdma_rxe}" 2>/dev/null; }

load_phase() {
	local k=$1 phase=$2 what=$3
	if [[ $phase == stock ]]; then
		t_start "$k $what stock: the distribution's rdma_rxe loads"
		if load_stock "$k"; then t_pass; else
			t_fail "cannot load $(stock_module "$k")"
			return 1
		fi
	else
		t_start "$k $what fixed: rxe-kvfix loads"
		if modprobe rdma_rxe && rxe_flavor rxe-kvfix; then t_pass; else
			t_fail "modprobe rdma_rxe did not give rxe-kvfix"
			return 1
		fi
	fi
}

unload_phase() {
	local k=$1 phase=$2 what=$3 bad
	t_check "$k $what $phase: rdma_rxe unloads" rmmod rdma_rxe
	[[ $phase == fixed ]] || return 0
	t_start "$k $what fixed: dmesg has no WARNING/BUG/Oops"
	bad=$(dmesg_bad)
	if [[ -z $bad ]]; then t_pass; else t_fail "$(head -n2 <<<"$bad" | tr '\n' ' ')"; fi
}

# shellcheck disable=SC2120

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
	[[ ! -f $GUEST_STATE/netns ]] || while read -r n; do
		ip netns del "$n" 2>/dev/null || true
	done <"$GUEST_STATE/netns"
	[[ ! -f $GUEST_STATE/dummies ]] || while read -r n; do
		ip link del "$n" 2>/dev/null || true
	done <"$GUEST_STATE/dummies"
	rm -f "$GUEST_STATE/netns" "$GUEST_STATE/dummies"
}

# --- the fragmenter (/usr/local/bin/rxe-fragment, put there by the caller) -------
# Shared by stress.sh and bench.sh. State: FRAG_PID (empty when not running),
# FRAG_LOG (its output) and FRAG_TOPUPS (top-ups it confirmed).
#
# rxe_frag_start LOG: start it in the background (it fills memory, then holds one
# mlocked page in every 2 MiB block) and wait up to 600 s for its "ready" line;
# 1 when it exited or never got ready (then it is stopped again).
rxe_frag_start() {
	FRAG_LOG=$1 FRAG_TOPUPS=0
	/usr/local/bin/rxe-fragment --leave 120 >"$FRAG_LOG" 2>&1 &
	FRAG_PID=$!
	for _ in $(seq 600); do
		grep -q 'fragment: ready' "$FRAG_LOG" && return 0
		kill -0 "$FRAG_PID" 2>/dev/null || break
		sleep 1
	done
	grep -q 'fragment: ready' "$FRAG_LOG" && return 0
	rxe_frag_stop
	return 1
}

# rxe_frag_topup: ask it (SIGUSR2) to take the free blocks of order >= 9 that appeared
# since, and wait up to 60 s for its "topup N done" line
rxe_frag_topup() {
	local n=$((FRAG_TOPUPS + 1))
	kill -USR2 "$FRAG_PID" 2>/dev/null || return 1
	for _ in $(seq 600); do
		if grep -q "^fragment: topup $n done" "$FRAG_LOG"; then
			FRAG_TOPUPS=$n
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# rxe_frag_stop: stop it (it frees everything and logs "buddyinfo released")
rxe_frag_stop() {
	[[ -n ${FRAG_PID:-} ]] || return 0
	kill -TERM "$FRAG_PID" 2>/dev/null || true
	wait "$FRAG_PID" 2>/dev/null || true
	FRAG_PID=''
}
