#!/usr/bin/env bash
# secureboot-test.sh: `rxe-kvfix status` under Secure Boot, on the host (no build root,
# no VM, no root). mokutil and modinfo are FAKES on PATH (printing the words and exit
# codes of mokutil's own source: --sb-state "SecureBoot enabled"/"SecureBoot disabled",
# --test-key "FILE is not enrolled" with exit 0 (releases up to 0.7.2, what the VM's
# Debian mokutil does) or 1 (the development branch), "FILE is already enrolled" with 1
# or 0, "... is already in the enrollment request"), so this tests rxe-kvfix's reading of them, not
# the firmware; the secureboot VM scenario runs the real mokutil under OVMF and shim.
# One kernel whose rdma_rxe resolves to rxe-kvfix (fake modinfo); the DKMS certificate
# given in a framework.conf.d file (RXE_KVFIX_DKMS_CONF_DIR):
#   - Secure Boot on, key not enrolled: the row is not-fixed (RDMA_RXE "REFUSED"), exit
#     1, one line naming the certificate and `mokutil --import CERT`; --json says so in
#     secure_boot and validates against kmod/rxe-kvfix-status.schema.json;
#   - Ubuntu (os-release), its shim key MOK.der: the line names
#     update-secureboot-policy --enroll-key;
#   - queued (mokutil --import done, not yet rebooted): still refused, "reboot";
#   - enrolled, Secure Boot off, and a --test-key error: fixed, exit 0.
#
# Cost: about 2 s, measured 2026-12-07.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RXE_PROG=secureboot-test
export RXE_PROG
# shellcheck source=tests/testlib.sh
. "$REPO/tests/testlib.sh"
t_suite kmod-secureboot

t_no_args "Usage: tests/kmod/secureboot-test.sh   (host only: jq, python3-jsonschema)" "$@"
t_workdir sb

K=7.2.13+deb14-amd64
mkdir -p "$W/bin" "$W/modules/$K/kernel" "$W/state" "$W/cache" "$W/dkms/framework.conf.d" \
	"$W/shim/var/lib/shim-signed/mok"
CERT=$W/keys/dkms.der
mkdir -p "$W/keys"
echo 'not read: the fake mokutil answers' >"$CERT"
printf '# DKMS key at a path of our own\nmok_signing_key=%s/keys/dkms.key\nmok_certificate="%s"\n' "$W" "$CERT" \
	>"$W/dkms/framework.conf.d/test-key.conf"
echo 'ID=debian' >"$W/os-debian"
printf 'ID=ubuntu\nID_LIKE=debian\n' >"$W/os-ubuntu"

# the fakes: mokutil answers from $W/sb (on|off|shim-off) and $W/key
# (not|not-dev|yes|yes-dev|queued|bad)
cat >"$W/bin/mokutil" <<EOF
#!/usr/bin/env bash
case \$1 in
--sb-state)
	case \$(cat "$W/sb") in
	on) echo 'SecureBoot enabled' ;;
	shim-off) printf 'SecureBoot enabled\nSecureBoot validation is disabled in shim\n' ;;
	*) echo 'SecureBoot disabled' ;;
	esac ;;
--test-key)
	case \$(cat "$W/key") in
	not) echo "\$2 is not enrolled" ;;                # mokutil 0.7.2 and older: exit 0
	not-dev) echo "\$2 is not enrolled"; exit 1 ;;    # the development branch since 2025
	yes) echo "\$2 is already enrolled"; exit 1 ;;    # 0.7.2 and older
	yes-dev) echo "\$2 is already enrolled" ;;
	queued) echo "\$2 is already in the enrollment request"; exit 1 ;; # 0.7.2
	*) echo 'Not a valid x509 certificate' >&2; exit 255 ;;
	esac ;;
*) exit 2 ;;
esac
EOF
cat >"$W/bin/modinfo" <<'EOF'
#!/usr/bin/env bash
# modinfo -k RELEASE -F version|-n rdma_rxe: rxe-kvfix's module
case $3 in
-F) echo 1.0.0-rxe-kvfix ;;
-n) echo "/lib/modules/$2/updates/dkms/rdma_rxe.ko.xz" ;;
esac
EOF
chmod +x "$W/bin/mokutil" "$W/bin/modinfo"

# status SB KEY OS [--json]: rxe-kvfix status in that state; sets OUT and RC
status() {
	echo "$1" >"$W/sb"
	echo "$2" >"$W/key"
	local os=$3
	shift 3
	RC=0
	OUT=$(PATH=$W/bin:$PATH RXE_KVFIX_MODULES_DIR=$W/modules RXE_KVFIX_STATE_DIR=$W/state \
		RXE_KVFIX_CACHE_DIR=$W/cache RXE_KVFIX_DKMS_CONF_DIR=$W/dkms RXE_KVFIX_OS_RELEASE=$W/os-$os \
		"$REPO/kmod/rxe-kvfix" status "$@" 2>&1) || RC=$?
}
jq_() { jq -r "$1" <<<"$OUT"; }

t_start "secureboot: on, DKMS key not enrolled: $K not-fixed (REFUSED), exit 1, 'mokutil --import CERT' named"
status on not debian
if ((RC == 1)) && grep -q "^$K .* rxe-kvfix REFUSED " <<<"$OUT" &&
	grep -qF "REFUSED: Secure Boot is on and $CERT, the key rxe-kvfix's module is signed with, is not enrolled" <<<"$OUT" &&
	grep -qF "Enrol it: mokutil --import $CERT, then reboot" <<<"$OUT"; then
	t_pass
else
	t_fail "exit $RC: $(tr '\n' '|' <<<"$OUT")"
fi

t_start "secureboot: --json: verdict not-fixed, secure_boot says refused, schema-valid"
status on not debian --json
if ((RC == 1)) && [[ $(jq_ '.kernels[0].verdict') == not-fixed &&
$(jq_ '[.secure_boot.enabled, .secure_boot.key, .secure_boot.refuses_module] | join(" ")') == "true not-enrolled true" &&
$(jq_ .secure_boot.certificate) == "$CERT" && $(jq_ .secure_boot.enrol) == "mokutil --import $CERT, then"* ]] &&
	err=$(python3 -c 'import json,sys,jsonschema; jsonschema.validate(json.loads(sys.argv[1]), json.load(open(sys.argv[2])))' \
		"$OUT" "$REPO/kmod/rxe-kvfix-status.schema.json" 2>&1); then
	t_pass
else
	t_fail "exit $RC: ${err:-$OUT}"
fi

t_start "secureboot: Ubuntu, DKMS signing with the shim key MOK.der: 'update-secureboot-policy --enroll-key' named"
UCERT=$W/shim/var/lib/shim-signed/mok/MOK.der
echo fake >"$UCERT"
printf 'mok_certificate=%s\n' "$UCERT" >"$W/dkms/framework.conf"
mv "$W/dkms/framework.conf.d/test-key.conf" "$W/test-key.conf"
status on not ubuntu
if ((RC == 1)) && grep -qF "REFUSED: Secure Boot is on and $UCERT," <<<"$OUT" &&
	grep -qF "Enrol it: update-secureboot-policy --enroll-key, then reboot" <<<"$OUT"; then
	t_pass
else
	t_fail "exit $RC: $(tr '\n' '|' <<<"$OUT")"
fi
rm "$W/dkms/framework.conf"
mv "$W/test-key.conf" "$W/dkms/framework.conf.d/test-key.conf"

t_start "secureboot: key queued by mokutil --import, not yet rebooted: still refused, exit 1, 'reboot' named"
status on queued debian
if ((RC == 1)) && grep -qF "is queued for enrolment but not enrolled yet" <<<"$OUT" &&
	grep -qF "until you reboot and in MokManager: Enroll MOK" <<<"$OUT"; then
	t_pass
else
	t_fail "exit $RC: $(tr '\n' '|' <<<"$OUT")"
fi

t_start "secureboot: key enrolled, Secure Boot off, shim validation off, --test-key error: fixed, exit 0, nothing refused"
bad=''
for st in 'on yes' 'on yes-dev' 'off not' 'shim-off not' 'on bad'; do
	# shellcheck disable=SC2086 # two words: the Secure Boot state and the key's
	status $st debian --json
	if ((RC != 0)) || [[ $(jq_ '.kernels[0].verdict') != fixed || $(jq_ .secure_boot.refuses_module) != false ]]; then
		bad+="[$st: exit $RC, $(jq_ -c .secure_boot 2>/dev/null || echo "$OUT")] "
	fi
done
if [[ -z $bad ]]; then t_pass; else t_fail "$bad"; fi

t_start "secureboot: mokutil's development branch (exit 1 on 'not enrolled', 0 on 'already enrolled'): the same verdicts"
status on not-dev debian --json
a="$RC $(jq_ '.kernels[0].verdict') $(jq_ .secure_boot.key)"
status on yes-dev debian --json
b="$RC $(jq_ '.kernels[0].verdict') $(jq_ .secure_boot.key)"
if [[ $a == "1 not-fixed not-enrolled" && $b == "0 fixed enrolled" ]]; then t_pass; else t_fail "not enrolled: $a; enrolled: $b"; fi

((${T_FAILS:-0} == 0))
