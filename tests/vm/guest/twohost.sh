#!/usr/bin/env bash
# twohost.sh: two test hosts in one guest (network namespaces rxa and rxb joined
# by veth, an rxe device in each), rxe-kvfix loaded.
#
#   twohost.sh KERNELRELEASE
#
# 1. rxe-verify serve in rxb, rxe-verify run --connect in rxa, 1 GiB + 16 B;
#    then the other way round.
# 2. The seed's nftables ruleset (tests/unit/data/nft-seed.conf: input policy
#    drop, nothing for UDP 4791) loaded in the serving namespace, with the
#    verifier's own TCP control port (47910) opened as an admin would, so only
#    RoCEv2 is blocked: the run fails within a bounded time, its diagnosis
#    names the network path / UDP 4791, and rxe-verify doctor in rxb says the
#    input rules drop RoCEv2.
# 3. An accept rule for UDP 4791 added: the run passes again.
set -uo pipefail

usage() { echo "Usage: twohost.sh KERNELRELEASE"; }
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rxe_guest_main vm-twohost 1 1 "$@"
K=$1
SEED=$SRC/tests/unit/data/nft-seed.conf
SIZE=1G OFFSET=16
BOUND=120 # seconds a run may take to notice that RoCEv2 is dropped

# pair NAME SERVER_NS CLIENT_NS SERVER_IP: serve + run; JSON in OUT/twohost-NAME.json
pair() {
	local name=$1 sns=$2 cns=$3 sip=$4 spid rc=0 t0
	ip netns exec "$sns" timeout 600 "$RV" serve -d "rxe_$sns" --timeout 120 >"$OUT/twohost-$name.serve.log" 2>&1 &
	spid=$!
	# wait (up to 60 s under emulation) until serve listens on its TCP port
	local i
	for ((i = 0; i < 120; i++)); do
		ip netns exec "$sns" ss -Hltn 'sport = :47910' | grep -q . && break
		sleep 0.5
	done
	t0=$SECONDS
	ip netns exec "$cns" timeout 600 "$RV" run -d "rxe_$cns" --connect "$sip" -s "$SIZE" --offset "$OFFSET" --json \
		>"$OUT/twohost-$name.json" 2>"$OUT/twohost-$name.err" || rc=$?
	echo "$((SECONDS - t0))" >"$OUT/twohost-$name.seconds"
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	return "$rc"
}

modprobe rdma_rxe
t_check "$K twohost: rxe-kvfix loaded" rxe_flavor rxe-kvfix
rxe_veth_up rxa rxb 1

t_start "$K twohost: rxb serves, rxa runs $SIZE+$OFFSET B over veth"
if pair a-to-b rxb rxa 10.77.1.2 && [[ $(jget "$OUT/twohost-a-to-b.json" 'r["result"] == "pass" and r["verified_bytes"] > 0') == true ]]; then
	t_pass
else
	t_fail "$(head -c 300 "$OUT/twohost-a-to-b.err") $(jget "$OUT/twohost-a-to-b.json" 'r.get("diagnosis")')"
fi
t_start "$K twohost: rxa serves, rxb runs $SIZE+$OFFSET B (the other way)"
if pair b-to-a rxa rxb 10.77.1.1 && [[ $(jget "$OUT/twohost-b-to-a.json" 'r["result"] == "pass" and r["verified_bytes"] > 0') == true ]]; then
	t_pass
else
	t_fail "$(head -c 300 "$OUT/twohost-b-to-a.err") $(jget "$OUT/twohost-b-to-a.json" 'r.get("diagnosis")')"
fi

# the seed's firewall on the serving side, the tool's control port opened
ip netns exec rxb nft -f "$SEED"
ip netns exec rxb nft insert rule inet filter input tcp dport 47910 accept
ip netns exec rxb nft list ruleset >"$OUT/twohost-ruleset.txt"

t_start "$K twohost: with the seed's ruleset in rxb, the run fails within ${BOUND}s and names the network path/UDP 4791"
rc=0
pair firewalled rxb rxa 10.77.1.2 || rc=$?
secs=$(cat "$OUT/twohost-firewalled.seconds")
cause=$(jget "$OUT/twohost-firewalled.json" '(r.get("diagnosis") or j.get("error") or {}).get("cause")')
text=$(jget "$OUT/twohost-firewalled.json" 'str(r.get("diagnosis") or j.get("error"))')
if ((rc == 0)); then
	t_fail "the run passed although the seed's ruleset drops UDP 4791"
elif ((secs > BOUND)); then
	t_fail "the run took ${secs}s to fail (bound ${BOUND}s)"
elif [[ $cause != network_path_or_firewall ]] || ! grep -q '4791' <<<"$text"; then
	t_fail "diagnosis does not name the path/UDP 4791: cause=$cause: $text"
else
	t_pass
	echo "     failed after ${secs}s: ${text:0:200}"
fi

t_start "$K twohost: rxe-verify doctor in rxb says the input rules drop RoCEv2 (UDP 4791)"
ip netns exec rxb "$RV" doctor --json >"$OUT/twohost-doctor.json" 2>"$OUT/twohost-doctor.err"
fw=$(jget "$OUT/twohost-doctor.json" 'j["firewall"]["roce_v2_input"]')
detail=$(jget "$OUT/twohost-doctor.json" '"; ".join(w for w in j["warnings"] if "4791" in w)')
if [[ $fw == drop ]] && grep -q 4791 <<<"$detail"; then
	t_pass
	echo "     $detail"
else
	t_fail "doctor says roce_v2_input=$fw: $detail"
fi

ip netns exec rxb nft insert rule inet filter input udp dport 4791 accept
t_start "$K twohost: with UDP 4791 accepted, the run passes again"
if pair reopened rxb rxa 10.77.1.2 && [[ $(jget "$OUT/twohost-reopened.json" 'r["result"] == "pass"') == true ]]; then
	t_pass
else
	t_fail "$(head -c 300 "$OUT/twohost-reopened.err") $(jget "$OUT/twohost-reopened.json" 'r.get("diagnosis")')"
fi
t_start "$K twohost: doctor in rxb now says RoCEv2 is accepted"
ip netns exec rxb "$RV" doctor --json >"$OUT/twohost-doctor2.json" 2>/dev/null
fw=$(jget "$OUT/twohost-doctor2.json" 'j["firewall"]["roce_v2_input"]')
if [[ $fw == accept ]]; then t_pass; else t_fail "doctor says roce_v2_input=$fw"; fi

rxe_veth_down rxa rxb
t_start "$K twohost: dmesg has no WARNING/BUG/Oops"
bad=$(dmesg_bad)
if [[ -z $bad ]]; then t_pass; else t_fail "$(head -n2 <<<"$bad" | tr '\n' ' ')"; fi
exit $((T_FAILS > 0))
