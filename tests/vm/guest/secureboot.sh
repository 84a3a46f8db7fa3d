#!/usr/bin/env bash
# secureboot.sh: rxe-kvfix under UEFI Secure Boot, in a guest booted
# by vm-run --secure-boot (OVMF with Microsoft's keys -> Debian's shim -> Debian's grub
# -> Debian's signed kernel; lockdown=integrity follows from Secure Boot).
#
#   secureboot.sh KERNELRELEASE untrusted PASSWORD
#       Secure Boot is on; the DKMS module (signed with /var/lib/dkms/mok.key, whose
#       certificate is not enrolled) is refused by modprobe, with the error and the
#       kernel's line recorded; the stock (Debian-signed) rdma_rxe loads and makes an
#       rxe device; nothing tainted. Then, as packaging/README.md says, the key is queued for
#       enrolment: mokutil --import /var/lib/dkms/mok.pub (with PASSWORD's hash), for
#       the next boot's MokManager. rxe-kvfix status says the kernel is not fixed
#       (REFUSED, the key not enrolled, then queued) and rxe-verify doctor that
#       rdma_rxe cannot load, both naming mokutil --import.
#   secureboot.sh KERNELRELEASE trusted
#       After MokManager enrolled it: Secure Boot is on, the key is enrolled (mokutil
#       --test-key) and in the kernel's .machine keyring, and modprobe rdma_rxe loads
#       rxe-kvfix (and makes an rxe device) with no E (unsigned-module) taint, only the O
#       every out-of-tree module sets; the stock module still loads; rxe-kvfix
#       status says fixed.
# Needs mokutil in the root (the scenario installs it in its overlay).
set -uo pipefail

usage() { echo "Usage: secureboot.sh KERNELRELEASE untrusted PASSWORD | KERNELRELEASE trusted"; }
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rxe_guest_main vm-secureboot 2 3 "$@"
K=$1 PHASE=$2 PW=${3:-}
MOK=/var/lib/dkms/mok.pub
EFIVARS=/sys/firmware/efi/efivars
# README.md and packaging/README.md "Module signing and Secure Boot" quote this as modprobe's error for a module whose key is not trusted
README_ERR='Key was rejected by service'
case $PHASE in
untrusted) [[ -n $PW ]] || {
	usage >&2
	exit 2
} ;;
trusted) ;;
*)
	usage >&2
	exit 2
	;;
esac

note() { echo "     $*"; }

# rxe-kvfix, the admin command: the packages' /usr/sbin/rxe-kvfix, else the checkout's, put
# on PATH as `make hooks-install` links it (rxe-verify doctor asks it about Secure Boot)
command -v rxe-kvfix >/dev/null || ln -sf /root/rxe-kvfix/kmod/rxe-kvfix /usr/local/sbin/rxe-kvfix

# jv KEY...: the value at KEY... of the JSON document on stdin (a number indexes a list;
# true/false/null as JSON writes them, a list of strings one a line, anything else as
# JSON); the root has no jq
jv() {
	python3 -c '
import json, sys
d = json.load(sys.stdin)
for k in sys.argv[1:]:
    d = d[int(k)] if isinstance(d, list) else d[k]
if isinstance(d, list) and all(isinstance(x, str) for x in d):
    d = "\n".join(d)
print(d if isinstance(d, str) else json.dumps(d))' "$@" 2>&1
}

# kvfix_says WANT_RC WANT_KEY WANT_WORDS: rxe-kvfix status for this kernel exits WANT_RC, its
# --json has secure_boot.key WANT_KEY and the kernel's verdict, and the text WANT_WORDS
kvfix_says() {
	local rc jrc txt js
	txt=$(rxe-kvfix status "$K" 2>&1)
	rc=$?
	js=$(rxe-kvfix status --json "$K" 2>&1)
	jrc=$?
	echo "$js" >"$OUT/kvfix-status-$PHASE-$1.json"
	note "rxe-kvfix status: exit $rc: $(tail -n +2 <<<"$txt" | tr '\n' '|' | cut -c1-600)"
	note "--json secure_boot: $(jv secure_boot <<<"$js"), verdict $(jv kernels 0 verdict <<<"$js")"
	[[ $rc == "$1" && $jrc == "$1" && $(jv secure_boot key <<<"$js") == "$2" && $txt == *"$3"* ]]
}

mountpoint -q $EFIVARS || mount -t efivarfs efivarfs $EFIVARS 2>/dev/null
mountpoint -q /sys/kernel/security || mount -t securityfs securityfs /sys/kernel/security 2>/dev/null

# 1. Secure Boot is on: the firmware's SecureBoot variable (4 attribute bytes, then 1),
# the kernel's own verdict and the lockdown it implies
t_start "$K sb $PHASE: Secure Boot is on (SecureBoot=1, lockdown, kernel says so)"
sbvar=$(od -An -tu1 "$EFIVARS/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c" 2>/dev/null | awk '{ print $NF }')
lockdown=$(cat /sys/kernel/security/lockdown 2>/dev/null)
sbstate=$(mokutil --sb-state 2>&1 | head -n1)
note "SecureBoot variable: ${sbvar:-unreadable}; lockdown: ${lockdown:-unreadable}; mokutil --sb-state: $sbstate"
note "$(dmesg | grep -m1 'secureboot:' || echo 'no secureboot: line in dmesg')"
if [[ $sbvar == 1 && $lockdown =~ \[(integrity|confidentiality)\] ]] &&
	dmesg | grep 'secureboot: Secure boot enabled' >/dev/null; then
	t_pass
else
	t_fail "SecureBoot=${sbvar:-?}, lockdown '${lockdown:-?}'"
	exit 1
fi

dkms_ko=$(rxe_module_file)
signer=$(modinfo -F signer "$dkms_ko" 2>/dev/null)
note "modprobe's rdma_rxe: $dkms_ko, signer: ${signer:-none}"
t_start "$K sb $PHASE: modprobe's rdma_rxe is the DKMS build, signed"
if [[ $dkms_ko == */updates/* && -n $signer ]]; then t_pass; else t_fail "module '$dkms_ko', signer '$signer'"; fi

taint0=$(cat /proc/sys/kernel/tainted)

# stock_round WHAT: the Debian-signed rdma_rxe loads, makes rxe0, unloads
stock_round() {
	t_start "$K sb $PHASE: the stock Debian-signed rdma_rxe loads and makes an rxe device$1"
	if load_stock "$K" && rxe_dummy_up rxe0 d0 10.77.0.1/24 >/dev/null; then
		t_pass
	else
		t_fail "load_stock/rxe_dummy_up failed: $(dmesg | tail -n 2 | tr '\n' ' ')"
	fi
	rxe_teardown_all >/dev/null 2>&1
	rmmod rdma_rxe 2>/dev/null
}

if [[ $PHASE == untrusted ]]; then
	t_start "$K sb untrusted: the DKMS key is not enrolled (mokutil --test-key)"
	tk=$(mokutil --test-key "$MOK" 2>&1)
	note "mokutil --test-key: $tk"
	if [[ $tk == *"is not enrolled"* ]]; then t_pass; else t_fail "$tk"; fi

	# issue 61: status said "fixed" here while the kernel refused the module
	t_start "$K sb untrusted: rxe-kvfix status: $K not fixed (REFUSED, exit 1), says to mokutil --import $MOK"
	if kvfix_says 1 not-enrolled "REFUSED: Secure Boot is on and $MOK, the key rxe-kvfix's module is signed with, is not enrolled" &&
		[[ $(jv kernels 0 verdict <"$OUT/kvfix-status-untrusted-1.json") == not-fixed ]] &&
		grep -qF "mokutil --import $MOK, then reboot" "$OUT/kvfix-status-untrusted-1.json"; then
		t_pass
	else
		t_fail "see the lines above"
	fi
	t_start "$K sb untrusted: rxe-verify doctor: not ready, rdma_rxe cannot load (Secure Boot, key not enrolled)"
	doc=$(rxe-verify doctor --json 2>/dev/null)
	drc=$?
	echo "$doc" >"$OUT/doctor-sb-untrusted.json"
	prob=$(jv problems <<<"$doc" | grep -m1 'Secure Boot')
	note "rxe-verify doctor: exit $drc; ${prob:-no Secure Boot problem: $(jv problems <<<"$doc")}"
	if ((drc == 3)) && [[ $prob == *"cannot load it: Secure Boot is on"*"mokutil --import $MOK"* &&
		$(jv secure_boot refuses_module <<<"$doc") == true ]]; then t_pass; else t_fail "doctor exit $drc"; fi

	t_start "$K sb untrusted: modprobe rdma_rxe (rxe-kvfix, untrusted key) is refused"
	dmesg -C
	err=$(modprobe rdma_rxe 2>&1)
	rc=$?
	klog=$(dmesg | grep -v -e 'ib_core\|ib_uverbs\|udp_tunnel' | tail -n 3)
	note "modprobe rdma_rxe: exit $rc: $err"
	note "dmesg: $klog"
	echo "$err" >"$OUT/refusal-modprobe.txt"
	echo "$klog" >"$OUT/refusal-dmesg.txt"
	if ((rc != 0)) && [[ ! -d /sys/module/rdma_rxe ]]; then t_pass; else t_fail "modprobe exit $rc, module loaded: $([[ -d /sys/module/rdma_rxe ]] && echo yes || echo no)"; fi
	# the words README quotes for the refusal
	t_start "$K sb untrusted: modprobe's refusal is README's ('$README_ERR')"
	if [[ $err == *"$README_ERR"* ]]; then t_pass; else t_fail "modprobe said '$err'"; fi

	stock_round ''

	t_start "$K sb untrusted: nothing tainted (kernel.tainted stays $taint0)"
	taint=$(cat /proc/sys/kernel/tainted)
	if [[ $taint == "$taint0" && $taint == 0 ]]; then t_pass; else t_fail "tainted $taint0 -> $taint"; fi

	t_start "$K sb untrusted: mokutil --import $MOK queues the key for MokManager"
	mokutil --generate-hash="$PW" >/tmp/mok.hash 2>/dev/null
	imp=$(mokutil --import "$MOK" --hash-file /tmp/mok.hash 2>&1)
	irc=$?
	new=$(mokutil --list-new 2>&1 | grep -m1 -i 'Subject:')
	note "mokutil --import: exit $irc ${imp:+($imp)}; --list-new: ${new:-nothing}"
	if ((irc == 0)) && [[ -n $new ]]; then t_pass; else t_fail "mokutil --import exit $irc: $imp"; fi
	t_start "$K sb untrusted: rxe-kvfix status with the key queued: still REFUSED (exit 1), says to reboot into MokManager"
	if kvfix_says 1 pending "is queued for enrolment but not enrolled yet"; then t_pass; else t_fail "see the lines above"; fi
	exit 0
fi

# trusted
t_start "$K sb trusted: the DKMS key is enrolled (mokutil --test-key) and in .machine"
tk=$(mokutil --test-key "$MOK" 2>&1)
cn=${signer:-?}
mline=$(dmesg | grep -m1 -F "Loaded X.509 cert '$cn" || true)
machine=$(grep -F ' .machine:' /proc/keys || true)
note "mokutil --test-key: $tk"
# shellcheck disable=SC2016  # $cn does expand (the quotes are inside double quotes)
note "dmesg: ${mline:-no line loading '$cn'}"
note "/proc/keys: ${machine:-no .machine keyring}"
if [[ $tk == *"is already enrolled"* && -n $mline && -n $machine ]]; then t_pass; else t_fail "test-key '$tk'; dmesg '${mline:-none}'"; fi

t_start "$K sb trusted: rxe-kvfix status: $K fixed (exit 0), the key enrolled, nothing refused"
if kvfix_says 0 enrolled "rxe-kvfix " && [[ $(jv kernels 0 verdict <"$OUT/kvfix-status-trusted-0.json") == fixed ]]; then
	t_pass
else
	t_fail "see the lines above"
fi

t_start "$K sb trusted: modprobe rdma_rxe loads rxe-kvfix and makes an rxe device"
dmesg -C
if err=$(modprobe rdma_rxe 2>&1) && rxe_flavor rxe-kvfix && rxe_dummy_up rxe0 d0 10.77.0.1/24 >/dev/null; then
	modtaint=$(cat /sys/module/rdma_rxe/taint 2>/dev/null)
	note "loaded: $(cat /sys/module/rdma_rxe/version 2>/dev/null), module taint '${modtaint}', $(rdma link show 2>/dev/null | head -n1)"
	t_pass
else
	t_fail "modprobe: $err; dmesg: $(dmesg | tail -n 2 | tr '\n' ' ')"
fi
rxe_teardown_all >/dev/null 2>&1
rmmod rdma_rxe 2>/dev/null

# An out-of-tree module taints the kernel O (4096) whatever its signature; what a
# module whose signature was not verified adds is E (8192, "unsigned module"): not here.
t_start "$K sb trusted: signature accepted: no E taint (kernel.tainted $taint0 -> only O, 4096)"
taint=$(cat /proc/sys/kernel/tainted)
note "kernel.tainted: $taint0 -> $taint; rdma_rxe's taint: '${modtaint:-?}'"
if [[ $taint0 == 0 && $taint == 4096 && ${modtaint:-} == O ]]; then t_pass; else t_fail "tainted $taint0 -> $taint, module '${modtaint:-?}'"; fi

stock_round ' (after enrolment too)'
exit 0
