#!/usr/bin/env bash
# fedora-fleet.sh: the Ansible role's RedHat path (packaging/ansible, site.yml) run
# against the Fedora-shaped root (simulated: Debian kernel, DKMS's Fedora code path,
# Fedora's file layout) through a chroot connection, as tests/fleet/run runs the Debian
# path: ansible's facts say Fedora / RedHat, the role installs the RPMs with its
# ansible.builtin.dnf task (the dnf Python module on the host: Debian's python3-dnf,
# dnf 4, which fedora.sh installs in the root beside dnf5), %post builds rdma_rxe for
# KERNEL, rxe-kvfix status decides, doctor and run execute (no RDMA device in a chroot:
# the verdict must be not_ready, exit 3), JSON fetched, one table. Step of fedora.sh,
# after the life with dnf5 (nothing of ours installed); it leaves nothing installed.
#
#   fedora-fleet.sh MNT RPMDIR KERNEL
#
# MNT: the Fedora-shaped root (fedora.sh's overlay, python3-dnf installed, KERNEL's
# source RPM in /var/cache/rxe-kvfix/sources); RPMDIR: a host directory with
# rxe-kvfix-dkms-*.noarch.rpm and rxe-verify-*.rpm; KERNEL: the one kernel the host
# keeps a build tree of (the others' build links are set aside meanwhile: one build).
# What is simulated beside the root: /etc/fedora-release, /etc/redhat-release and
# /etc/system-release as Fedora's fedora-release-common ships them (ansible reads them
# before os-release), removed afterwards.
# Cost: about 100 s (91 and 109 s measured 2026-12-08 on the shared host: the play 75-98 s, most of
# it the DKMS build of KERNEL in %post, the erase afterwards about 15 s).
# Results: one testlib line (suite pkg-fedora).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=tests/testlib.sh
. "$REPO/tests/testlib.sh"
t_suite pkg-fedora

usage() { sed -n '/^#   fedora-fleet.sh MNT/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
[[ ${1:-} != -h && ${1:-} != --help ]] || {
	usage
	exit 0
}
if (($# != 3)) || [[ ! -d $1/usr/src/kernels || ! -d $2 ]]; then
	echo "fedora-fleet.sh: needs MNT (the Fedora-shaped root), RPMDIR and KERNEL (try --help)" >&2
	exit 2
fi
MNT=$1 RPMDIR=$(realpath "$2") K=$3
LABEL="the Ansible role's RedHat path on the Fedora-shaped root (simulated): facts RedHat, ansible.builtin.dnf installs the RPMs, DKMS builds for $K, verdict not_ready, JSON fetched"
if ! command -v ansible-playbook >/dev/null; then
	t_skip "$LABEL" "ansible-playbook is not installed on this host (tests/host-deps: Debian package ansible)"
	exit 0
fi

W=$(mktemp -d /var/tmp/rxe-kvfix-fedora-fleet.XXXXXX)
aside=()
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	local b
	chroot "$MNT" rpm -e rxe-kvfix-dkms rxe-verify >/dev/null 2>&1 || true
	rm -rf "$MNT/var/cache/rxe-kvfix-ansible" "$MNT/var/lib/rxe-verify/ansible"
	rm -f "$MNT/etc/fedora-release" "$MNT/etc/redhat-release" "$MNT/etc/system-release"
	for b in "${aside[@]}"; do mv "$W/links/$b" "$MNT/lib/modules/$b/build"; done
	rm -rf "$W"
}
trap cleanup EXIT

echo "Fedora release 44 (simulated: the Fedora-shaped root of rxe-kvfix's tests)" >"$MNT/etc/fedora-release"
ln -sfn fedora-release "$MNT/etc/redhat-release"
ln -sfn fedora-release "$MNT/etc/system-release"
mkdir -p "$W/links"
for b in "$MNT"/lib/modules/*/build; do
	[[ -L $b && $b != "$MNT/lib/modules/$K/build" ]] || continue
	b=${b%/build}
	b=${b##*/}
	mv "$MNT/lib/modules/$b/build" "$W/links/$b"
	aside+=("$b")
done
cat >"$W/inventory.yml" <<EOF
all:
  children:
    rxe_test_hosts:
      vars:
        ansible_connection: community.general.chroot
        ansible_become: false
        ansible_python_interpreter: /usr/bin/python3
        rxe_kvfix_kernel: $K
        rxe_kvfix_package_dir: $RPMDIR
      hosts:
        fedora-shaped:
          ansible_host: $MNT
EOF

t_start "$LABEL"
rc=0
(cd "$REPO/packaging/ansible" && timeout 900 ansible-playbook -i "$W/inventory.yml" -e rxe_kvfix_fetch_dir="$W/out" site.yml) \
	>"$W/ansible.log" 2>&1 || rc=$?
# task NAME: what the play printed for that task of the role (its block of the log)
task() { awk -v t="TASK [rxe_kvfix : $1]" 'index($0, "TASK [") == 1 { on = (index($0, t) == 1) } on' "$W/ansible.log"; }
dnf=$(task 'Install with dnf (RedHat family)' | grep -c '^changed: \[fedora-shaped\]' || true)
apt=$(task 'Install with apt (Debian family)' | grep -c '^skipping: \[fedora-shaped\]' || true)
row=$(grep '^fedora-shaped ' "$W/out/fleet-table.txt" 2>/dev/null || true)
if ((rc != 0)); then
	t_fail "ansible-playbook exit $rc: $(grep -E '^fatal|FAILED!|ERROR' "$W/ansible.log" | head -n2 | tr '\n' ' ' | cut -c1-400)"
elif [[ $dnf != 1 || $apt != 1 ]]; then
	t_fail "the role's dnf task did not install the packages (or its apt task ran): $(task 'Install with dnf (RedHat family)' | tr '\n' ' ' | cut -c1-300)"
elif ! chroot "$MNT" rpm -q rxe-kvfix-dkms rxe-verify >/dev/null 2>&1; then
	t_fail "rpm -q: $(chroot "$MNT" rpm -q rxe-kvfix-dkms rxe-verify 2>&1 | tr '\n' ' ')"
elif [[ $row != *" not_ready (exit 3) "* || $row != *"$K: installed"* ]]; then
	t_fail "the fleet table's row: '${row:-none}'"
else
	t_pass
	echo "     facts: RedHat (the apt task skipped, the dnf task changed); $(grep -A3 '^PLAY RECAP' "$W/ansible.log" | grep '^fedora-shaped' | tr -s ' ')"
	echo "     $row"
fi
exit $((T_FAILS > 0))
