#!/usr/bin/env bash
# systemd.sh: runs under systemd (vmhost/vm-run --systemd) after the boot has
# finished, and checks what rxe-verify-boot.service did in this boot.
#
#   systemd.sh KERNELRELEASE first|second|repair [ansible]
#
# first:  the unit ran (condition true), exit success, one verdict line at journal
#         priority notice saying PASS, JSON under /var/lib/rxe-verify/K/ with
#         verdict pass and module rxe-kvfix; the rxe device it created on the
#         test-only dummy netdev is gone again, the netdev untouched (address,
#         MAC; its details in netdev.txt).
# second: same kernel again: the unit's condition is false (it did not run), no
#         verdict line in this boot, the first boot's results unchanged.
# repair: the kernel booted without its rxe-kvfix module installed and with the
#         stock rdma_rxe loaded early: rxe-kvfix-boot.service installed it and
#         reloaded rdma_rxe before the check's verdict, then everything of first.
# ansible: packaging/ansible/site.yml with connection local against this guest
#         (rxe device created by the role on the dummy netdev): install tasks
#         unchanged (packages pre-installed), a passing verdict in the fleet table.
# Copies the unit's journal lines, /var/lib/rxe-verify and the table to /results.
set -uo pipefail

usage() { echo "Usage: systemd.sh KERNELRELEASE first|second|repair [ansible]"; }
# shellcheck source=vmhost/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../../vmhost/guest/lib.sh"
rxe_guest_main vm-systemd 2 3 "$@"
K=$1 PHASE=$2 ANSIBLE=${3:-}
[[ $PHASE == first || $PHASE == second || $PHASE == repair ]] || {
	usage >&2
	exit 2
}
[[ -z $ANSIBLE || $ANSIBLE == ansible ]] || {
	usage >&2
	exit 2
}
UNIT="rxe-verify-boot.service"
STATE=/var/lib/rxe-verify/$K
NETDEV=rxetest0 # made by the test-only unit rxe-kvfix-test-netdev.service
# the address that unit gives it (written once, in 70-systemd's unit text)
NETDEV_MAC=$(sed -n "s/^ExecStart=ip link add $NETDEV address \([0-9a-f:]*\) type dummy\$/\1/p" \
	/etc/systemd/system/rxe-kvfix-test-netdev.service 2>/dev/null || true)
DEBS=/root/debs # .debs for the playbook to install, when a run puts some there

prop() { systemctl show -P "$1" "$UNIT"; }

t_start "$K systemd $PHASE: PID 1 is systemd, booted $K"
if [[ $(cat /proc/1/comm) == systemd && $(uname -r) == "$K" ]]; then t_pass; else t_fail "PID 1 is $(cat /proc/1/comm), kernel $(uname -r)"; fi
journalctl -b -u "$UNIT" --no-pager -o short-monotonic >"$OUT/journal-unit.txt" 2>&1
journalctl -b -t rxe-verify-boot --no-pager -o verbose --output-fields=PRIORITY,MESSAGE >"$OUT/journal-verdict.txt" 2>&1
systemctl show "$UNIT" -p ConditionResult -p Result -p ExecMainStatus -p ActiveState >"$OUT/unit-state.txt"
cat "$OUT/unit-state.txt"
{
	echo "addr_assign_type=$(cat "/sys/class/net/$NETDEV/addr_assign_type" 2>&1)"
	ip -d link show "$NETDEV"
	udevadm info "/sys/class/net/$NETDEV"
} >"$OUT/netdev.txt" 2>&1
verdict_line=$(journalctl -b -t rxe-verify-boot -p notice..notice -o cat --no-pager | grep "^rxe-verify-boot: kernel $K:" || true)

if [[ $PHASE == repair ]]; then
	journalctl -b -o short-monotonic --no-pager -t rxe-kvfix-boot -t rxe-verify-boot >"$OUT/journal-repair.txt" 2>&1
	t_start "$K systemd repair: rxe-kvfix-boot.service installed rxe-kvfix for $K and reloaded the stock rdma_rxe loaded before it"
	rep=$(journalctl -b -t rxe-kvfix-boot -o cat --no-pager 2>/dev/null || true)
	if grep -q "kernel $K has no rxe-kvfix module" <<<"$rep" && grep -q "built and installed rxe-kvfix for $K" <<<"$rep" &&
		grep -q "reloaded rdma_rxe: .*-rxe-kvfix" <<<"$rep" && [[ $(cat /sys/module/rdma_rxe/version 2>/dev/null) == *-rxe-kvfix ]]; then
		t_pass
		grep -E 'has no rxe-kvfix|built and installed|reloaded' <<<"$rep" | sed 's/^/     journal: /'
	else
		t_fail "rxe-kvfix-boot: $(tr '\n' ' ' <<<"$rep" | cut -c1-400); loaded rdma_rxe $(cat /sys/module/rdma_rxe/version 2>&1)"
	fi
	t_start "$K systemd repair: the reload came before the boot check's verdict"
	# the monotonic time of the first line of each that matches
	at() { grep -m1 -- "$1" "$OUT/journal-repair.txt" | sed -E 's/^\[ *([0-9.]+)\].*/\1/'; }
	t_rel=$(at 'reloaded rdma_rxe') t_ver=$(at "rxe-verify-boot: kernel $K:")
	if [[ -n $t_rel && -n $t_ver ]] && awk -v a="$t_rel" -v b="$t_ver" 'BEGIN { exit !(a < b) }'; then
		t_pass
		echo "     reloaded at ${t_rel} s, verdict at ${t_ver} s (monotonic)"
	else
		t_fail "reload at '${t_rel}', verdict at '${t_ver}' (journal-repair.txt)"
	fi
fi

if [[ $PHASE == first || $PHASE == repair ]]; then
	t_start "$K systemd $PHASE: $UNIT ran on the first boot of $K and succeeded"
	if [[ $(prop ConditionResult) == yes && $(prop Result) == success && $(prop ExecMainStatus) == 0 ]]; then
		t_pass
	else
		t_fail "$(tr '\n' ' ' <"$OUT/unit-state.txt")"
	fi
	t_start "$K systemd $PHASE: one PASS verdict line in the journal at priority notice"
	if [[ $(grep -c . <<<"$verdict_line") == 1 && $verdict_line == *": PASS: "* ]]; then
		t_pass
		echo "     journal: $verdict_line"
	else
		t_fail "verdict lines at notice: '${verdict_line:0:300}' (see journal-unit.txt)"
	fi
	t_start "$K systemd $PHASE: JSON under $STATE: doctor ready, run verdict pass on rxe-kvfix, 1 GiB + 16 B verified"
	v=$(cat "$STATE/verdict" 2>/dev/null)
	run_ok=$(jget "$STATE/run.json" 'j["verdict"] == "pass" and j["module"]["flavor"] == "rxe-kvfix" and r["size"] == 1 << 30 and r["offset"] == 16 and r["metadata_order"] == 11 and r["verified_bytes"] > 0')
	doc_ok=$(jget "$STATE/doctor.json" 'j["ready"] == True')
	if [[ $v == pass && $run_ok == true && $doc_ok == true ]]; then
		t_pass
	else
		t_fail "verdict=$v run_ok=$run_ok doctor_ready=$doc_ok"
	fi
	t_start "$K systemd $PHASE: the rxe device the check made on $NETDEV is gone, $NETDEV untouched"
	left=$(find /sys/class/infiniband -mindepth 1 -maxdepth 1 -printf '%f ' 2>/dev/null)
	addr=$(ip -4 -o addr show dev "$NETDEV" 2>/dev/null | awk '{print $4}')
	mac=$(cat "/sys/class/net/$NETDEV/address" 2>/dev/null)
	if [[ -z $left && $addr == 10.77.9.1/24 && -n $NETDEV_MAC && $mac == "$NETDEV_MAC" ]] && grep -q "on rxe_boot" "$STATE/summary"; then
		t_pass
	else
		t_fail "rdma devices left: '$left', $NETDEV address '$addr' MAC '$mac' (the unit's: '$NETDEV_MAC'; see netdev.txt), summary: $(cat "$STATE/summary" 2>/dev/null)"
	fi
else
	t_start "$K systemd second: $UNIT skipped on the second boot of $K (condition false)"
	if [[ $(prop ConditionResult) == no && -z $verdict_line ]]; then
		t_pass
		grep -i -m1 'condition' "$OUT/journal-unit.txt" | sed 's/^/     journal: /'
	else
		t_fail "$(tr '\n' ' ' <"$OUT/unit-state.txt") verdict lines: '${verdict_line:0:200}'"
	fi
	t_check "$K systemd second: the first boot's verdict is still there (pass)" grep -qx pass "$STATE/verdict"
fi
cp -a /var/lib/rxe-verify "$OUT/var-lib-rxe-verify"

if [[ -n $ANSIBLE ]]; then
	work=$(mktemp -d)
	inv=$work/inventory.yml
	cat >"$inv" <<EOF
all:
  children:
    rxe_test_hosts:
      hosts:
        $(hostname):
          ansible_connection: local
          ansible_become: false
          ansible_python_interpreter: /usr/bin/python3
          rxe_kvfix_netdev: $NETDEV
          rxe_kvfix_package_dir: $DEBS
          rxe_kvfix_fetch_dir: $work/results
EOF
	# the packages (make deb) were installed in the root before boot; without them
	# the role only checks DKMS and verifies
	extra=()
	compgen -G "$DEBS/*.deb" >/dev/null || extra=(-e rxe_kvfix_install=false)
	t_start "$K systemd ansible: site.yml with connection local against this guest"
	rc=0
	(cd "$SRC/packaging/ansible" && ANSIBLE_NOCOLOR=1 timeout 1500 ansible-playbook -i "$inv" \
		-e rxe_kvfix_fetch_dir="$work/results" "${extra[@]}" site.yml) >"$OUT/ansible.log" 2>&1 || rc=$?
	tail -n 30 "$OUT/ansible.log"
	if ((rc == 0)); then t_pass; else t_fail "ansible-playbook exited $rc (see ansible.log)"; fi
	cp -a "$work/results" "$OUT/ansible-results" 2>/dev/null
	t_start "$K systemd ansible: the install tasks report ok, not changed (packages already installed)"
	if ((${#extra[@]})); then
		t_skip "no .deb files in $DEBS (make deb was not available), install tasks not run"
	elif grep -q 'TASK \[rxe_kvfix : Query the installed versions\]' "$OUT/ansible.log" &&
		! grep -A3 'TASK \[rxe_kvfix : Install with apt' "$OUT/ansible.log" | grep -q '^changed:'; then
		t_pass
	else
		t_fail "install tasks did not run or changed something (see ansible.log)"
	fi
	t_start "$K systemd ansible: the fleet table has this host with verdict pass on rxe-kvfix"
	row=$(grep "^$(hostname) " "$work/results/fleet-table.txt" 2>/dev/null)
	if [[ $row == *" rxe-kvfix "* && $row == *" pass (exit 0) "* ]]; then
		t_pass
		cat "$work/results/fleet-table.txt"
	else
		t_fail "row: '${row:-none}'"
	fi
fi

t_start "$K systemd $PHASE: dmesg has no WARNING/BUG/Oops"
bad=$(dmesg_bad)
if [[ -z $bad ]]; then t_pass; else t_fail "$(head -n2 <<<"$bad" | tr '\n' ' ')"; fi
exit $((T_FAILS > 0))
