#!/usr/bin/env bash
# fedora-fetch.sh: on the Fedora-shaped root (simulated: Debian kernel, DKMS's
# Fedora code path, Fedora's file layout), a new kernel's source RPM comes by
# itself from a dnf repository, outside the package transaction. Real parts:
# Debian's dnf5 and createrepo-c (sid) serving a local file:// repository that
# holds the kernel's source RPM (made by fedora-shape.sh) and a stand-in binary
# "kernel" package naming it as its source; the root booted under its own
# systemd with systemd-nspawn, so rxe-kvfix-fetch@.service runs as a unit would.
#   1. rpm -i rxe-kvfix-dkms with dnf present: %post (inside the transaction) does
#      not run dnf; the kernel's line says the source comes after the transaction
#   2. booted: `kernel-install add B` exits 0 with every plugin after ours run;
#      rxe-kvfix-fetch@B.service (started --no-block by our plugin) runs
#      dnf5 download --srpm from the repository, and rxe-kvfix is built into /extra
#   3. the repository unreachable: kernel-install add still exits 0, later plugins
#      ran, the unit's failure recorded in one line; the repository back,
#      rxe-kvfix-boot.service repairs it (told which kernel is "booted" with
#      RXE_KVFIX_RELEASE: a container runs the host's kernel)
#
#   fedora-fetch.sh MNT RPMDIR B
#
# MNT: the Fedora-shaped overlay (fedora-shape.sh), with the checkout at
# /root/rxe-kvfix and B's kernel-devel in place; RPMDIR (inside MNT): the
# rxe-kvfix-dkms RPM. Needs systemd-nspawn (tests/host-deps) and the network
# (apt-get install dnf5 createrepo-c in the overlay). Cost: about 3 minutes.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=vmhost/lib.sh
. "$REPO/vmhost/lib.sh"
# shellcheck source=tests/testlib.sh
. "$REPO/tests/testlib.sh"
t_suite pkg-fedora
readonly F="Fedora-shaped (simulated)"

usage() { sed -n '/^#   fedora-fetch.sh MNT/,/^# (apt-get install/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
[[ ${1:-} != -h && ${1:-} != --help ]] || { usage; exit 0; }
(($# == 3)) || { usage >&2; exit 2; }
MNT=$1 RPMDIR=$2 B=$3
if ! command -v systemd-nspawn >/dev/null; then
	t_skip "$F: dnf download --srpm outside the transaction (nspawn)" "systemd-nspawn is not installed on this host (apt install systemd-container; tests/host-deps)"
	exit 0
fi
UP=${B%%[+-]*}
SRPM=$(find "$MNT/srv/rxe-srpms" -name "kernel-$UP-*.src.rpm" -print -quit 2>/dev/null || true)
[[ -n $SRPM ]] || { t_fail "$F: setup" "no kernel-$UP-*.src.rpm kept in $MNT/srv/rxe-srpms"; exit 1; }
NVR=$(basename "$SRPM" .src.rpm)
NVR=${NVR#kernel-}
in_mnt() { chroot "$MNT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

# --- the repository ------------------------------------------------------------
t_start "$F: dnf5 and createrepo-c (Debian sid) installed, a file:// repository with kernel-$NVR.src.rpm"
W=$(mktemp -d /var/tmp/rxe-kvfix-fedora-fetch.XXXXXX)
LEADER=''
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	if [[ -n $LEADER ]]; then kill -TERM "$LEADER" 2>/dev/null || true; sleep 3; kill -KILL "$LEADER" 2>/dev/null || true; fi
	rm -rf "$W"
}
rxe_on_exit cleanup
R=/srv/rxe-fedora-repo
mkdir -p "$MNT$R/x86_64" "$MNT$R/source" "$W/rpm/SPECS"
cp "$SRPM" "$MNT$R/source/"
# the binary package dnf download --srpm starts from (Fedora's repositories have
# kernel-N-V-R.x86_64 beside the source RPM)
ver=${NVR%%-*} rel=${NVR#*-}
printf 'Name: kernel\nVersion: %s\nRelease: %s\nSummary: rxe-kvfix test: stands for Fedora kernel %s in a Fedora-shaped repository\nLicense: GPL-2.0-only\nBuildArch: noarch\n%%description\nrxe-kvfix test package (Fedora-shaped, simulated).\n%%files\n' \
	"$ver" "$rel" "$NVR" >"$W/rpm/SPECS/kernel.spec"
if out=$( {
	rpmbuild -bb --define "_topdir $W/rpm" --define '_build_id_links none' "$W/rpm/SPECS/kernel.spec" &&
		cp "$W"/rpm/RPMS/noarch/kernel-*.rpm "$MNT$R/x86_64/" &&
		in_mnt env DEBIAN_FRONTEND=noninteractive apt-get install -y -q dnf5 createrepo-c &&
		in_mnt createrepo_c -q "$R/x86_64" && in_mnt createrepo_c -q "$R/source"
} 2>&1); then
	t_pass
	echo "     $(in_mnt dnf5 --version | head -n1); $(find "$MNT$R" -name "*.rpm" | wc -l) packages"
else
	t_fail "$(tail -n3 <<<"$out" | tr '\n' ' ')"
	exit 1
fi
mkdir -p "$MNT/etc/yum.repos.d" "$MNT/etc/dnf/vars"
printf '[rxe-test]\nname=rxe-kvfix test repository (Fedora-shaped)\nbaseurl=file://%s/x86_64\ngpgcheck=0\n\n[rxe-test-source]\nname=rxe-kvfix test repository (Fedora-shaped) - Source\nbaseurl=file://%s/source\ngpgcheck=0\nenabled=0\n' \
	"$R" "$R" >"$MNT/etc/yum.repos.d/rxe-test.repo"
echo 44 >"$MNT/etc/dnf/vars/releasever"

# --- 1. %post inside the transaction --------------------------------------------
t_start "$F: rpm -i rxe-kvfix-dkms with dnf present: %post runs no dnf, says the source comes after the transaction"
rc=0
out=$(in_mnt rpm -i "$RPMDIR"/rxe-kvfix-dkms-*.noarch.rpm 2>&1) || rc=$?
if ((rc == 0)) && grep -q "rxe-kvfix-dkms: no source of kernel $B found.*downloaded once this package transaction is over (rxe-kvfix-fetch@$B.service)" <<<"$out" &&
	! pgrep -x dnf5 >/dev/null; then
	t_pass
	grep "$B" <<<"$out" | grep -v '^rxe-kvfix-dkms: warning' | sed 's/^/     /' | cut -c1-260
else
	t_fail "exit $rc: $(grep -F "$B" <<<"$out" | tr '\n' ' ' | cut -c1-600)"
fi

# --- boot the root under its own systemd ----------------------------------------
rxe_chroot_api_umount "$MNT"
t_start "$F: the root booted under its own systemd (systemd-nspawn)"
# the unified cgroup hierarchy: the root's systemd refuses the legacy one
SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 systemd-nspawn -q -D "$MNT" -M rxe-fedora-shaped -b --register=no --keep-unit \
	>"$W/nspawn.log" 2>&1 &
NSPAWN=$!
for _ in $(seq 60); do
	LEADER=$(pgrep -P "$NSPAWN" -x systemd || true)
	[[ -z $LEADER ]] || break
	sleep 1
done
in_ct() { nsenter -t "$LEADER" -a /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
state=''
if [[ -n $LEADER ]]; then state=$(in_ct timeout 90 systemctl is-system-running --wait 2>/dev/null || true); fi
if [[ $state == running || $state == degraded ]]; then
	t_pass
	echo "     systemd $(in_ct systemctl --version | head -n1 | cut -d' ' -f2): $state"
else
	t_fail "no systemd running in the container (state '$state'): $(tail -n3 "$W/nspawn.log" | tr '\n' ' ')"
	exit 1
fi

# started UNIT: how many runs of UNIT have ended (the journal's count: an ended
# oneshot unit is unloaded, its timestamps with it; the hook always exits 0)
started() { in_ct journalctl -q -o cat -u "$1" 2>/dev/null | grep -c 'Deactivated successfully' || true; }
UNIT=$(in_ct systemd-escape --template=rxe-kvfix-fetch@.service "$B")
# wait_unit UNIT SINCE: until UNIT has run and ended after SINCE (its job may first
# wait for network-online.target) (at most 300 s)
wait_unit() {
	local s
	for _ in $(seq 150); do
		s=$(in_ct systemctl is-active "$1" 2>/dev/null || true)
		if [[ $(started "$1") != "$2" && $s != activating && $s != active && $s != reloading ]]; then return 0; fi
		sleep 2
	done
}
field() { sed -n "s/^$2=//p" "$MNT/var/lib/rxe-kvfix/status/$1" 2>/dev/null | head -n1; }
plugins_after_ours() { # OUT: the plugins after 41-rxe-kvfix that kernel-install ran
	grep -oE '/[0-9]{2}-[a-z0-9-]+\.install' <<<"$1" | sed 's#^/##' | sort -u | awk -F- '$1 > 41' | tr '\n' ' '
}

# --- 2. kernel-install add: the unit fetches and builds ------------------------
t_start "$F: kernel-install add $B exits 0, every plugin after ours runs, our plugin starts rxe-kvfix-fetch@$B.service"
t0=$SECONDS rc=0 since=$(started "$UNIT")
out=$(in_ct kernel-install -v add "$B" "/lib/modules/$B/vmlinuz" 2>&1) || rc=$?
later=$(plugins_after_ours "$out")
if ((rc == 0)) && [[ -n $later ]] && grep -q "rxe-kvfix: kernel $B: its source is fetched and rxe-kvfix built in the background" <<<"$out"; then
	t_pass
	echo "     plugins run after 41-rxe-kvfix: $later"
else
	t_fail "exit $rc, later plugins '$later': $(tr '\n' ' ' <<<"$out" | cut -c1-1500)"
fi
wait_unit "$UNIT" "$since"
t_start "$F: rxe-kvfix-fetch@$B.service: dnf5 download --srpm kernel-$UP from the repository, rxe-kvfix built into /extra"
prov=$(cat "$MNT/var/cache/rxe-kvfix/sources/kernel-$UP.rxe.tar.xz.provenance" 2>/dev/null || true)
journal=$(in_ct journalctl -q -o cat -u 'rxe-kvfix-fetch@*' 2>/dev/null || true)
if [[ $(field "$B" state) == built && -n $(find "$MNT/lib/modules/$B/extra" -name 'rdma_rxe.ko*' 2>/dev/null) ]] &&
	grep -q "^file=kernel-$NVR.src.rpm" <<<"$prov" && grep -q '^verified=dnf5' <<<"$prov"; then
	t_pass
	echo "     $((SECONDS - t0)) s from kernel-install add to the module; $(grep -ho 'origin=dnf .*' "$MNT"/var/lib/dkms/rxe-kvfix/*/"$B"/*/log/make.log 2>/dev/null | head -n1)"
	echo "     $(grep '^verified=' <<<"$prov")"
else
	t_fail "state '$(field "$B" state)': $(field "$B" message | cut -c1-200); journal: $(tail -n4 <<<"$journal" | tr '\n' ' ' | cut -c1-300)"
fi

# --- 3. the repository unreachable, then the repair at boot ---------------------
V=$(in_ct rpm -q --qf '%{VERSION}' rxe-kvfix-dkms)
# unbuild, not remove: removing the last kernel's build unregisters the module
in_ct dkms unbuild "rxe-kvfix/$V" -k "$B" >/dev/null 2>&1 || true
st=$(in_ct dkms status rxe-kvfix 2>&1 || true)
if [[ -n $(find "$MNT/lib/modules/$B/extra" -name 'rdma_rxe.ko*' 2>/dev/null) || $st != *"rxe-kvfix/$V"* ]]; then
	t_fail "$F: setup of the unreachable case" "dkms unbuild rxe-kvfix/$V -k $B: $(tr '\n' ' ' <<<"$st")"
fi
rm -f "$MNT/var/cache/rxe-kvfix/sources/kernel-$UP".rxe.tar.xz* "$MNT/var/lib/rxe-kvfix/status/$B"
in_ct dnf5 -q clean all >/dev/null 2>&1 || true
mv "$MNT$R" "$MNT$R.away"
t_start "$F: repository unreachable: kernel-install add $B still exits 0, later plugins run, the failure recorded in one line"
rc=0 since=$(started "$UNIT")
out=$(in_ct kernel-install -v add "$B" "/lib/modules/$B/vmlinuz" 2>&1) || rc=$?
later=$(plugins_after_ours "$out")
wait_unit "$UNIT" "$since"
msg=$(field "$B" message)
if ((rc == 0)) && [[ -n $later && $(field "$B" state) == failed ]] &&
	grep -q "the download failed: dnf5 download --srpm kernel-$UP failed .*on a host that reaches the repository run dnf download --srpm kernel-$UP" <<<"$msg"; then
	t_pass
	echo "     later plugins: $later; recorded: $(sed -E 's#/srv/[^ ]*#<repo>#g' <<<"$msg" | cut -c1-240)"
else
	t_fail "exit $rc, later '$later', state '$(field "$B" state)': $(cut -c1-300 <<<"$msg")"
fi
mv "$MNT$R.away" "$MNT$R"
t_start "$F: repository back: rxe-kvfix-boot.service (RXE_KVFIX_RELEASE=$B) fetches and builds it"
in_ct systemctl set-environment "RXE_KVFIX_RELEASE=$B"
in_ct systemctl start rxe-kvfix-boot.service >/dev/null 2>&1 || true
if [[ $(field "$B" state) == built && -n $(find "$MNT/lib/modules/$B/extra" -name 'rdma_rxe.ko*' 2>/dev/null) ]]; then
	t_pass
	echo "     $(in_ct journalctl -q -o cat -u rxe-kvfix-boot.service | grep -E 'built and installed|dkms autoinstall' | tail -n2 | tr '\n' ' ')"
else
	t_fail "state '$(field "$B" state)': $(field "$B" message | cut -c1-300)"
fi
in_ct systemctl poweroff >/dev/null 2>&1 || true
for _ in $(seq 30); do kill -0 "$NSPAWN" 2>/dev/null || break; sleep 1; done
LEADER=''
kill -0 "$NSPAWN" 2>/dev/null && kill -KILL "$NSPAWN" 2>/dev/null
wait "$NSPAWN" 2>/dev/null || true
rxe_chroot_api_mount "$MNT"
exit $((T_FAILS > 0))
