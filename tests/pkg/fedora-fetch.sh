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
#   2. booted: `dnf5 install kernel-N-V-R` of a stand-in kernel package whose
#      %posttrans runs kernel-install add B (as Fedora's kernel-core does) exits 0
#      with every plugin after ours run; rxe-kvfix-fetch@B.service (started
#      --no-block by our plugin) waits for the transaction to end, then runs
#      dnf5 download --srpm from the repository; rxe-kvfix is built into /extra
#   3. the repository unreachable: kernel-install add still exits 0, later plugins
#      ran, the unit's failure recorded in one line; the repository back with nothing
#      on the host changed: rxe-kvfix-boot.service (told which kernel is "booted" with
#      RXE_KVFIX_RELEASE: a container runs the host's kernel) does not download again
#      (no storm); after dnf5 makecache (the metadata changed) it repairs it, and
#      rxe-kvfix status says the repository served it
#   4. bad source RPMs from dnf (rxe-kvfix-fetch --fedora, the unit's fetch): a
#      corrupt one and a truncated one the repository's metadata vouches for
#      (rpmkeys --checksig refuses them), a truncated one the metadata does not
#      describe (dnf or rpmkeys refuses it), one signed with a key rpm does not trust
#      (signature NOT OK), then the same with the key imported (accepted): each
#      failure one line naming what to do, nothing kept in the cache; then
#      broken third-party repositories beside it: still fetched
#   4c. the archive of record, Koji's package layout (simulated: python3's
#      http.server on 127.0.0.1, topurl in /etc/koji.conf.d; a test key): with
#      excludepkgs=kernel*, and with the repository no longer indexing the build,
#      the signed copy is fetched (archive=koji); Koji's unsigned copy alone is
#      refused; archive=never asks nothing of Koji and names a remedy that can
#      succeed; the same failure in the same state is not tried again
#   4e. a translated locale (de_DE.UTF-8 made in the root; Debian's dnf5 has German
#      catalogs): dnf5 answers in German, the fetch still reads a broken third-party
#      repository as such and fetches from the repository, and falls through to Koji's
#      layout when the repository no longer indexes the build (about 10 s)
#   4d. /tmp a 64 KiB tmpfs: the source RPM is unpacked on disk (/var/tmp)
#   5. dnf5 remove of the kernel package: its %preun kernel-install remove exits 0,
#      later plugins ran, rxe-kvfix's record and kept source of that kernel are gone
#   6. Fedora-named kernels end to end (tests/pkg/fedora-named.sh): three installed,
#      then dnf5 install rxe-kvfix-dkms; status exit 0 with the archive of each
#
#   fedora-fetch.sh MNT RPMDIR B
#
# MNT: the Fedora-shaped overlay (fedora-shape.sh), with the checkout at
# /root/rxe-kvfix and B's kernel-devel in place; RPMDIR (inside MNT): the
# rxe-kvfix-dkms RPM. Needs systemd-nspawn (tests/host-deps) and the network
# (apt-get install dnf5 createrepo-c curl in the overlay). Cost: about 4 to 5 minutes
# (4c and 4d: about 10 s; 3's boot repair, now after a try that downloads nothing: 2 to 4 s)
# before 6, whose cost fedora-named.sh states.
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
[[ ${1:-} != -h && ${1:-} != --help ]] || {
	usage
	exit 0
}
(($# == 3)) || {
	usage >&2
	exit 2
}
MNT=$1 RPMDIR=$2 B=$3
if ! command -v systemd-nspawn >/dev/null; then
	t_skip "$F: dnf download --srpm outside the transaction (nspawn)" "systemd-nspawn is not installed on this host (apt install systemd-container; tests/host-deps)"
	exit 0
fi
UP=${B%%[+-]*}
SRPM=$(find "$MNT/srv/rxe-srpms" -name "kernel-$UP-*.src.rpm" -print -quit 2>/dev/null || true)
[[ -n $SRPM ]] || {
	t_fail "$F: setup" "no kernel-$UP-*.src.rpm kept in $MNT/srv/rxe-srpms"
	exit 1
}
NVR=$(basename "$SRPM" .src.rpm)
NVR=${NVR#kernel-}
in_mnt() { chroot "$MNT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

# --- the repository ------------------------------------------------------------
t_start "$F: dnf5, createrepo-c and curl (Debian sid) installed, a file:// repository with kernel-$NVR.src.rpm"
W=$(mktemp -d /var/tmp/rxe-kvfix-fedora-fetch.XXXXXX)
LEADER='' HTTPD=''
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	[[ -z $HTTPD ]] || kill "$HTTPD" 2>/dev/null || true
	if [[ -n $LEADER ]]; then
		kill -TERM "$LEADER" 2>/dev/null || true
		sleep 3
		kill -KILL "$LEADER" 2>/dev/null || true
	fi
	gpgconf --homedir "$W/gnupg" --kill gpg-agent >/dev/null 2>&1 || true
	rm -rf "$W"
}
rxe_on_exit cleanup
R=/srv/rxe-fedora-repo
mkdir -p "$MNT$R/x86_64" "$MNT$R/source" "$W/rpm/SPECS"
cp "$SRPM" "$MNT$R/source/"
# the binary package dnf download --srpm starts from (Fedora's repositories have
# kernel-N-V-R.x86_64 beside the source RPM)
ver=${NVR%%-*} rel=${NVR#*-}
# and whose %posttrans and %preun run kernel-install as Fedora's kernel-core does (-v
# added so that the test sees which plugins ran)
printf 'Name: kernel\nVersion: %s\nRelease: %s\nSummary: rxe-kvfix test: stands for Fedora kernel %s in a Fedora-shaped repository\nLicense: GPL-2.0-only\nBuildArch: noarch\n%%description\nrxe-kvfix test package (Fedora-shaped, simulated).\n%%posttrans\n/usr/bin/kernel-install -v add %s /lib/modules/%s/vmlinuz || exit $?\n%%preun\n/usr/bin/kernel-install -v remove %s || exit $?\n%%files\n' \
	"$ver" "$rel" "$NVR" "$B" "$B" "$B" >"$W/rpm/SPECS/kernel.spec"
if out=$({
	rpmbuild -bb --define "_topdir $W/rpm" --define '_build_id_links none' "$W/rpm/SPECS/kernel.spec" &&
		cp "$W"/rpm/RPMS/noarch/kernel-*.rpm "$MNT$R/x86_64/" &&
		in_mnt env DEBIAN_FRONTEND=noninteractive apt-get install -y -q dnf5 createrepo-c curl &&
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

# dnf5_in_root: a dnf5 runs inside this root (its /proc/PID/root is MNT); dnf5 of other
# roots or of the host, another test's, are not this root's transaction
dnf5_in_root() {
	local p
	for p in $(pgrep -x dnf5); do
		[[ $(readlink "/proc/$p/root" 2>/dev/null) != "$MNT" ]] || return 0
	done
	return 1
}

# --- 1. %post inside the transaction --------------------------------------------
t_start "$F: rpm -i rxe-kvfix-dkms with dnf present: %post runs no dnf, says the source comes after the transaction"
rc=0
out=$(in_mnt rpm -i "$RPMDIR"/rxe-kvfix-dkms-*.noarch.rpm 2>&1) || rc=$?
if ((rc == 0)) && grep -q "^rxe-kvfix: kernel $B: NOT BUILT, .*no source of kernel $B found.*downloaded once this package transaction is over (rxe-kvfix-fetch@$B.service)" <<<"$out" &&
	! dnf5_in_root; then
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
# until the root's systemd says it is up (a loaded host has been seen to take over 90 s
# here). Right after its exec, systemd has no bus socket yet and systemctl cannot
# connect at all (it prints nothing): ask again until the deadline.
if [[ -n $LEADER ]]; then
	deadline=$((SECONDS + 240))
	while ((SECONDS < deadline)); do
		state=$(in_ct timeout $((deadline - SECONDS)) systemctl is-system-running --wait 2>/dev/null || true)
		case $state in running | degraded | maintenance | stopping) break ;; esac
		sleep 1
	done
fi
if [[ $state == running || $state == degraded ]]; then
	t_pass
	echo "     systemd $(in_ct systemctl --version | head -n1 | cut -d' ' -f2): $state"
else
	t_fail "no systemd running in the container (state '$state', leader '$LEADER'): jobs: $([[ -z $LEADER ]] || in_ct systemctl list-jobs --no-legend 2>&1 | head -n5 | tr '\n' ' '); $(tail -n3 "$W/nspawn.log" | tr '\n' ' ')"
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

# --- 2. dnf install of the kernel: the unit fetches and builds after it ----------
t_start "$F: dnf5 install kernel-$NVR: its %posttrans kernel-install add $B exits 0, every plugin after ours runs, ours starts rxe-kvfix-fetch@$B.service"
t0=$SECONDS rc=0 since=$(started "$UNIT")
out=$(in_ct dnf5 -y install "kernel-$NVR" 2>&1) || rc=$?
dnf_end=$(date +%s)
later=$(plugins_after_ours "$out")
if ((rc == 0)) && [[ -n $later ]] && grep -q "rxe-kvfix: kernel $B: its source is fetched and rxe-kvfix built in the background" <<<"$out"; then
	t_pass
	echo "     plugins run after 41-rxe-kvfix: $later"
else
	t_fail "exit $rc, later plugins '$later': $(tr '\n' ' ' <<<"$out" | cut -c1-1500)"
fi
wait_unit "$UNIT" "$since"
t_start "$F: rxe-kvfix-fetch@$B.service: after dnf5's transaction, dnf5 download --srpm kernel-$UP from the repository, rxe-kvfix built into /extra"
PROV=$MNT/var/cache/rxe-kvfix/sources/kernel-$UP.rxe.tar.xz.provenance
prov=$(cat "$PROV" 2>/dev/null || true)
kept_at=$(stat -c %Y "$PROV" 2>/dev/null || echo 0)
journal=$(in_ct journalctl -q -o cat -u 'rxe-kvfix-fetch@*' 2>/dev/null || true)
if [[ $(field "$B" state) == built && -n $(find "$MNT/lib/modules/$B/extra" -name 'rdma_rxe.ko*' 2>/dev/null) ]] &&
	grep -q "^file=kernel-$NVR.src.rpm" <<<"$prov" && grep -q '^verified=dnf5' <<<"$prov" && ((kept_at >= dnf_end)); then
	t_pass
	echo "     $((SECONDS - t0)) s from dnf5 install to the module; $(grep -ho 'origin=dnf .*' "$MNT"/var/lib/dkms/rxe-kvfix/*/"$B"/*/log/make.log 2>/dev/null | head -n1)"
	echo "     $(grep '^verified=' <<<"$prov"); source kept $((kept_at - dnf_end)) s after dnf5 install returned"
	grep -m1 'waiting for the package transaction' <<<"$journal" | sed 's/^/     unit: /' || true
else
	t_fail "kept at $kept_at, dnf5 returned at $dnf_end; state '$(field "$B" state)': $(field "$B" message | cut -c1-200); journal: $(tail -n4 <<<"$journal" | tr '\n' ' ' | cut -c1-300)"
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
# no download storm (kmod/rxe-kvfix-fetch-fedora.sh): the failure is remembered
# with the state it was made in; the same state within a day is not tried again
t_start "$F: repository back, nothing on the host changed: rxe-kvfix-boot.service (RXE_KVFIX_RELEASE=$B) does not download again (no storm), says when it will"
in_ct systemctl set-environment "RXE_KVFIX_RELEASE=$B"
t1=$SECONDS
in_ct systemctl start rxe-kvfix-boot.service >/dev/null 2>&1 || true
msg=$(field "$B" message)
if [[ $(field "$B" state) == failed ]] && grep -q "not tried again: nothing changed since that try at .*tried again after .*dnf makecache" <<<"$msg" &&
	[[ -z $(find "$MNT/var/cache/rxe-kvfix/sources" -name "kernel-$UP.rxe.tar.xz" 2>/dev/null) ]]; then
	t_pass
	echo "     $((SECONDS - t1)) s; recorded: $(grep -o 'not tried again.*' <<<"$msg" | cut -c1-230)"
else
	t_fail "state '$(field "$B" state)': $(cut -c1-300 <<<"$msg")"
fi
t_start "$F: dnf5 makecache (the repository metadata changed): rxe-kvfix-boot.service (RXE_KVFIX_RELEASE=$B) fetches and builds it; rxe-kvfix status (text, --json) says the repository served it"
in_ct dnf5 -q makecache >/dev/null 2>&1 || true
in_ct systemctl start rxe-kvfix-boot.service >/dev/null 2>&1 || true
st=$(in_ct rxe-kvfix status "$B" 2>&1 || true)
sj=$(in_ct rxe-kvfix status --json "$B" 2>&1 || true)
if [[ $(field "$B" state) == built && -n $(find "$MNT/lib/modules/$B/extra" -name 'rdma_rxe.ko*' 2>/dev/null) ]] &&
	grep -q "^$B .* from repository" <<<"$st" && [[ $(jq -r '.kernels[0].source.archive' <<<"$sj" 2>/dev/null) == repository ]]; then
	t_pass
	grep "^$B" <<<"$st" | sed 's/^/     status: /'
	echo "     $(in_ct journalctl -q -o cat -u rxe-kvfix-boot.service | grep -E 'built and installed|dkms autoinstall' | tail -n2 | tr '\n' ' ')"
else
	t_fail "state '$(field "$B" state)': $(field "$B" message | cut -c1-300); status: $(grep "^$B" <<<"$st" | cut -c1-200); --json archive: $(jq -r '.kernels[0].source.archive' <<<"$sj" 2>&1 | head -n1)"
fi

# --- 4. bad source RPMs ---------------------------------------------------------
FETCH=/usr/src/rxe-kvfix-$V/kmod/rxe-kvfix-fetch
SRC=$MNT$R/source
cp "$SRC/kernel-$NVR.src.rpm" "$W/good.src.rpm"
# serve FILE [stale]: FILE as the repository's kernel-NVR.src.rpm, its metadata
# made again (or, with stale, left describing the good one)
serve() {
	cp "$1" "$SRC/kernel-$NVR.src.rpm"
	[[ ${2:-} == stale ]] || in_mnt createrepo_c -q --update "$R/source" >/dev/null
	in_ct dnf5 -q clean all >/dev/null 2>&1 || true
}
# bad_case NAME FILE [stale] PATTERN: the fetch fails with one line matching
# PATTERN and keeps nothing
bad_case() {
	local name=$1 file=$2 stale='' pat
	if (($# == 4)); then stale=$3 pat=$4; else pat=$3; fi
	t_start "$F: bad input, $name: rxe-kvfix-fetch --fedora fails in one line, nothing kept"
	serve "$file" "$stale"
	rm -rf "$MNT/var/tmp/rxe-bad-cache"
	local rc=0 out lines
	out=$(in_ct "$FETCH" -q --fedora --cache /var/tmp/rxe-bad-cache "$B" "$UP" 2>&1) || rc=$?
	lines=$(grep -c '^rxe-kvfix-fetch: error:' <<<"$out" || true)
	if ((rc == 1)) && [[ $lines == 1 ]] && grep -qE "$pat" <<<"$out" &&
		[[ -z $(find "$MNT/var/tmp/rxe-bad-cache" -type f 2>/dev/null) ]]; then
		t_pass
		echo "     $(grep '^rxe-kvfix-fetch: error:' <<<"$out" | sed -E 's#/srv/[^ ]*#<repo>#g' | cut -c1-400)"
	else
		t_fail "exit $rc, $lines error line(s): $(tail -n3 <<<"$out" | tr '\n' ' ' | cut -c1-600); kept: $(find "$MNT/var/tmp/rxe-bad-cache" -type f 2>/dev/null | tr '\n' ' ')"
	fi
}
size=$(stat -c %s "$W/good.src.rpm")
cp "$W/good.src.rpm" "$W/corrupt.src.rpm"
printf 'rxe-kvfix-test-corruption' | dd of="$W/corrupt.src.rpm" bs=1 seek=$((size / 2)) conv=notrunc status=none
head -c $((size * 2 / 3)) "$W/good.src.rpm" >"$W/truncated.src.rpm"
bad_case "a corrupt source RPM the metadata vouches for" "$W/corrupt.src.rpm" "fails rpmkeys --checksig .*NOT OK.*dnf download --srpm kernel-$UP"
bad_case "a truncated source RPM the metadata vouches for" "$W/truncated.src.rpm" "kernel-$NVR.src.rpm (fails rpmkeys --checksig|cannot unpack).*dnf download --srpm kernel-$UP"
# dnf5 copies a file:// repository's package without checking it against the
# metadata (seen here), so rpmkeys is what refuses it; over http dnf refuses it
bad_case "a truncated source RPM the metadata does not describe" "$W/truncated.src.rpm" stale "(dnf5 download --srpm kernel-$UP failed|kernel-$NVR.src.rpm fails rpmkeys --checksig).*dnf download --srpm kernel-$UP"
# a signature by a key this rpm database does not hold: made on the host (gpg,
# rpmsign), checked by the root's rpm
GH=$W/gnupg
mkdir -m 700 "$GH"
if gpg --batch -q --homedir "$GH" --pinentry-mode loopback --passphrase '' --quick-gen-key 'rxe-kvfix test key <rxe-kvfix-test@invalid>' rsa2048 sign never 2>"$W/gpg.err" &&
	cp "$W/good.src.rpm" "$W/signed.src.rpm" &&
	rpmsign --define "__gpg $(command -v gpg)" --define "_gpg_path $GH" --define '_gpg_name rxe-kvfix test key' \
		--addsign "$W/signed.src.rpm" </dev/null >"$W/sign.log" 2>&1; then
	bad_case "a source RPM signed with a key rpm does not trust" "$W/signed.src.rpm" "fails rpmkeys --checksig .*SIGNATURES NOT OK"
	gpg --batch -q --homedir "$GH" --armor --export >"$MNT/var/tmp/rxe-test-key.asc"
	t_start "$F: the same source RPM with its key imported (rpmkeys --import): fetched, the provenance says its signature is OK"
	rm -rf "$MNT/var/tmp/rxe-bad-cache"
	rc=0
	out=$(in_ct sh -c "rpmkeys --import /var/tmp/rxe-test-key.asc && $FETCH -q --fedora --cache /var/tmp/rxe-bad-cache $B $UP" 2>&1) || rc=$?
	prov=$(cat "$MNT/var/tmp/rxe-bad-cache/kernel-$UP.rxe.tar.xz.provenance" 2>/dev/null || true)
	if ((rc == 0)) && grep -qi '^verified=dnf5 .*signatures OK' <<<"$prov"; then
		t_pass
		echo "     $(grep '^verified=' <<<"$prov")"
	else
		t_fail "exit $rc: $(tail -n2 <<<"$out" | tr '\n' ' ' | cut -c1-300); provenance: $(grep '^verified=' <<<"$prov")"
	fi
	in_ct rpm -e --allmatches gpg-pubkey >/dev/null 2>&1 || true
else
	t_fail "$F: bad input, signed source RPM: setup" "gpg/rpmsign: $(tail -n2 "$W/gpg.err" "$W/sign.log" 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
fi
serve "$W/good.src.rpm"
rm -rf "$MNT/var/tmp/rxe-bad-cache" "$MNT/var/tmp/rxe-test-key.asc"

# --- 4b. broken third-party repositories beside the one that serves it -----------
# one without metadata (an empty directory), one nothing answers for (127.0.0.1, a
# port checked closed); skip_if_unavailable=False said per repository, as a third
# party's repository inherits it from Fedora's dnf5 (Debian's dnf.conf says True)
port=9
while (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
mkdir -p "$MNT/srv/rxe-test-empty-repo"
printf '[rxe-third-party]\nname=a third party repository without metadata\nbaseurl=file:///srv/rxe-test-empty-repo\ngpgcheck=0\nskip_if_unavailable=False\n\n[rxe-third-party-net]\nname=a third party repository nothing answers for\nbaseurl=http://127.0.0.1:%s/repo\ngpgcheck=0\nskip_if_unavailable=False\n' \
	"$port" >"$MNT/etc/yum.repos.d/rxe-third-party.repo"
t_start "$F: broken third-party repositories (no metadata; 127.0.0.1:$port closed) beside the one serving it: rxe-kvfix-fetch --fedora still fetches kernel-$UP"
in_ct dnf5 -q clean all >/dev/null 2>&1 || true
rm -rf "$MNT/var/tmp/rxe-bad-cache"
rc=0
out=$(in_ct "$FETCH" --fedora --cache /var/tmp/rxe-bad-cache "$B" "$UP" 2>&1) || rc=$?
if ((rc == 0)) && [[ -f $MNT/var/tmp/rxe-bad-cache/kernel-$UP.rxe.tar.xz ]] && grep -q 'ignored the repositories dnf5 could not read' <<<"$out"; then
	t_pass
	grep -m1 'could not read a repository' <<<"$out" | sed -E 's#/srv/[^ ]*#<repo>#g' | cut -c1-300 | sed 's/^/     /'
else
	t_fail "exit $rc: $(grep '^rxe-kvfix-fetch:' <<<"$out" | tail -n2 | tr '\n' ' ' | cut -c1-400)"
fi
rm -rf "$MNT/var/tmp/rxe-bad-cache" "$MNT/srv/rxe-test-empty-repo" "$MNT/etc/yum.repos.d/rxe-third-party.repo"
in_ct dnf5 -q clean all >/dev/null 2>&1 || true

# --- 4c. the archive of record: Koji's package layout (simulated) ----------------
# Fedora's updates repository indexes the newest build only, and a host may say
# excludepkgs=kernel*: kernel-NVR then comes from Koji's package layout,
# TOPURL/packages/kernel/V/R/src/ (Koji's main copy, unsigned) and
# .../data/signed/KEYID/src/ (the copy signed by KEYID), served here by python3's
# http.server on 127.0.0.1 (simulated; the URL from the root's /etc/koji.conf.d), the
# signature checked by the root's rpm against the key it trusts (a test key,
# simulated; Fedora's in real life). Fetched for B with its N-V-R given (B's name
# carries no Fedora release).
KC=/var/tmp/rxe-koji-cache
KV=${NVR%%-*} KR=${NVR#*-}
kid=$(gpg --homedir "$GH" --with-colons --list-keys 2>/dev/null | awk -F: '$1 == "pub" {print tolower(substr($5, length($5) - 7)); exit}')
KP=$W/koji/kojifiles/packages/kernel/$KV/$KR
kport=8470
while (echo >"/dev/tcp/127.0.0.1/$kport") 2>/dev/null; do kport=$((kport + 1)); done
t_start "$F: Koji's package layout (simulated: http.server on 127.0.0.1:$kport, topurl in /etc/koji.conf.d) with kernel-$NVR: Koji's unsigned main copy, a copy signed by the test key (simulated)"
if [[ -n $kid && -f $W/signed.src.rpm ]] && mkdir -p "$KP/src" "$KP/data/signed/$kid/src" &&
	cp "$W/good.src.rpm" "$KP/src/kernel-$NVR.src.rpm" && cp "$W/signed.src.rpm" "$KP/data/signed/$kid/src/kernel-$NVR.src.rpm" &&
	gpg --batch -q --homedir "$GH" --armor --export >"$MNT/var/tmp/rxe-test-key.asc" &&
	in_ct rpmkeys --import /var/tmp/rxe-test-key.asc; then
	python3 -m http.server --bind 127.0.0.1 --directory "$W/koji" "$kport" >"$W/http.log" 2>&1 &
	HTTPD=$!
	mkdir -p "$MNT/etc/koji.conf.d"
	printf "[koji]\n; rxe-kvfix test: Koji's package layout, simulated (a local server)\ntopurl = http://127.0.0.1:%s/kojifiles\n" "$kport" >"$MNT/etc/koji.conf.d/rxe-test.conf"
	for _ in $(seq 20); do
		curl -fs -o /dev/null "http://127.0.0.1:$kport/kojifiles/" && break
		sleep 0.5
	done
	t_pass
	echo "     $(find "$W/koji" -name '*.src.rpm' | sed "s#^$W/koji/##" | tr '\n' ' ')"
else
	t_fail "signing key '$kid', signed copy: $(ls "$W"/signed.src.rpm 2>&1)"
fi
cp "$MNT/etc/dnf/dnf.conf" "$W/dnf.conf"
# koji_fetch ARGS...: rxe-kvfix-fetch --fedora ARGS into a fresh KC; sets rc, out, prov
koji_fetch() {
	rc=0
	: >"$W/http.log"
	out=$(in_ct "$FETCH" --fedora --cache "$KC" "$@" "$B" "$NVR" 2>&1) || rc=$?
	prov=$(cat "$MNT$KC/kernel-$NVR.rxe.tar.xz.provenance" 2>/dev/null || true)
}
rm -rf "$MNT$KC"
printf 'excludepkgs=kernel*\n' >>"$MNT/etc/dnf/dnf.conf"
t_start "$F: excludepkgs=kernel* in dnf.conf: dnf5 finds no kernel-$NVR, rxe-kvfix-fetch --fedora takes it from Koji's package layout (simulated), the copy signed by a key rpm trusts; provenance archive=koji"
koji_fetch
if ((rc == 0)) && grep -qx 'archive=koji' <<<"$prov" && grep -q '^verified=rpmkeys --checksig .*signatures OK.*data/signed/' <<<"$prov" &&
	grep -q "GET /kojifiles/packages/kernel/$KV/$KR/data/signed/$kid/src/kernel-$NVR.src.rpm" "$W/http.log"; then
	t_pass
	echo "     $(grep -E '^(archive|verified)=' <<<"$prov" | tr '\n' ' ')"
	grep -m1 'No match\|No package\|failed (' <<<"$out" | cut -c1-200 | sed 's/^/     dnf5: /' || true
else
	t_fail "exit $rc: $(grep '^rxe-kvfix-fetch' <<<"$out" | tail -n3 | tr '\n' ' ' | cut -c1-600); provenance: $(tr '\n' ' ' <<<"$prov")"
fi

t_start "$F: archive=never with excludepkgs=kernel*: nothing asked of Koji's layout; one line whose remedy can succeed (dnf download --srpm --disableexcludes=main, koji download-build --arch=src)"
rm -rf "$MNT$KC"
koji_fetch --archive never
if ((rc == 1)) && [[ $(grep -c '^rxe-kvfix-fetch: error:' <<<"$out") == 1 && ! -s $W/http.log ]] &&
	grep -q "^rxe-kvfix-fetch: error: .*archive=never.*; run dnf download --srpm --disableexcludes=main kernel-$NVR .* or koji download-build --arch=src kernel-$NVR" <<<"$out"; then
	t_pass
	grep '^rxe-kvfix-fetch: error:' <<<"$out" | sed 's/^rxe-kvfix-fetch: error: .*; run /     remedy: run /' | cut -c1-300
else
	t_fail "exit $rc, http requests: $(wc -l <"$W/http.log"): $(grep '^rxe-kvfix-fetch' <<<"$out" | tail -n2 | tr '\n' ' ' | cut -c1-500)"
fi
t_start "$F: no download storm: the same fetch again, nothing changed: fails at once, no dnf5 run, says when it tries again; a file dropped in the cache: tried again"
koji_fetch --archive never
rc1=$rc out1=$out
mkdir -p "$MNT$KC" && touch "$MNT$KC/dropped-by-hand"
koji_fetch --archive never
# (the fetch's own line "dnf5 download --srpm kernel-NVR" when it runs dnf5)
if ((rc1 == 1)) && grep -q 'not tried again: nothing changed since that try' <<<"$out1" && ! grep -qx "rxe-kvfix-fetch: dnf5 download --srpm kernel-$NVR" <<<"$out1" &&
	((rc == 1)) && grep -qx "rxe-kvfix-fetch: dnf5 download --srpm kernel-$NVR" <<<"$out"; then
	t_pass
	grep -o 'not tried again[^)]*' <<<"$out1" | head -n1 | cut -c1-220 | sed 's/^/     /'
else
	t_fail "first exit $rc1: $(grep '^rxe-kvfix-fetch' <<<"$out1" | tail -n1 | cut -c1-300); after the drop exit $rc: $(grep '^rxe-kvfix-fetch' <<<"$out" | head -n2 | tr '\n' ' ' | cut -c1-300)"
fi
cp "$W/dnf.conf" "$MNT/etc/dnf/dnf.conf"

t_start "$F: the repository no longer indexes kernel-$NVR (superseded by a newer build): taken from Koji's package layout (simulated), archive=koji"
mv "$SRC/kernel-$NVR.src.rpm" "$W/indexed.src.rpm"
in_mnt createrepo_c -q --update "$R/source" >/dev/null
in_ct dnf5 -q clean all >/dev/null 2>&1 || true
rm -rf "$MNT$KC"
koji_fetch
if ((rc == 0)) && grep -qx 'archive=koji' <<<"$prov" && grep -q 'signatures OK' <<<"$prov"; then
	t_pass
else
	t_fail "exit $rc: $(grep '^rxe-kvfix-fetch' <<<"$out" | tail -n3 | tr '\n' ' ' | cut -c1-600)"
fi
t_start "$F: bad input, Koji's layout holds only its unsigned main copy: refused (no signature by a key rpm trusts), one line naming koji download-build"
mv "$KP/data" "$W/koji-signed"
rm -rf "$MNT$KC"
koji_fetch
if ((rc == 1)) && [[ $(grep -c '^rxe-kvfix-fetch: error:' <<<"$out") == 1 ]] &&
	grep -q "error: .*Koji's package layout served no kernel-$NVR.src.rpm signed by a key rpm trusts (tried: .*src/kernel-$NVR.src.rpm (rpmkeys --checksig: digests OK).*; run koji download-build --arch=src kernel-$NVR" <<<"$out" &&
	[[ -z $(find "$MNT$KC" -name '*.tar.xz' 2>/dev/null) ]]; then
	t_pass
	grep '^rxe-kvfix-fetch: error:' <<<"$out" | cut -c1-400 | sed 's/^/     /'
else
	t_fail "exit $rc: $(grep '^rxe-kvfix-fetch' <<<"$out" | tail -n2 | tr '\n' ' ' | cut -c1-600)"
fi
mv "$W/koji-signed" "$KP/data"
mv "$W/indexed.src.rpm" "$SRC/kernel-$NVR.src.rpm"
in_mnt createrepo_c -q --update "$R/source" >/dev/null
in_ct dnf5 -q clean all >/dev/null 2>&1 || true

# --- 4e. a translated locale: dnf5 answers in German -----------------------------
# Debian's dnf5 and libdnf5 carry their German catalogs (libdnf5.mo translates
# "Failed to download metadata", which the fetch matches to retry without the
# repositories dnf cannot read); de_DE.UTF-8 is made here, in this overlay only,
# from the host's locale sources. Debian's rpm has no German catalog, so rpmkeys
# (whose "signatures OK" the Koji path reads) stays English here: the Koji line
# below shows the fall-through still works in German, not rpm's translation.
de=(env LANG=de_DE.UTF-8 LANGUAGE=de)
printf '[rxe-third-party]\nname=a third party repository without metadata\nbaseurl=file:///srv/rxe-test-empty-repo\ngpgcheck=0\nskip_if_unavailable=False\n' \
	>"$MNT/etc/yum.repos.d/rxe-third-party.repo"
mkdir -p "$MNT/srv/rxe-test-empty-repo"
t_start "$F: translated locale: de_DE.UTF-8 made in the root, dnf5 answers in German (its own catalogs)"
i18n=/usr/share/i18n
if [[ ! -f $MNT/usr/share/locale/de/LC_MESSAGES/libdnf5.mo ]]; then
	t_fail "the root has no libdnf5.mo for de: the lines below could not fail"
elif [[ ! -f $i18n/locales/de_DE ]]; then
	t_fail "no locale sources on the host ($i18n/locales/de_DE): install locales on the host"
elif ! { rm -rf "$MNT/root/i18n" && cp -a "$i18n" "$MNT/root/i18n" &&
	err=$(in_mnt env I18NPATH=/root/i18n localedef -i de_DE -f UTF-8 de_DE.UTF-8 2>&1); }; then
	t_fail "localedef de_DE.UTF-8: $(tail -n1 <<<"${err:-copy of $i18n failed}")"
else
	in_ct dnf5 -q clean all >/dev/null 2>&1 || true
	ger=$(in_ct "${de[@]}" dnf5 download --srpm --destdir /var/tmp/rxe-de-probe "kernel-$UP" 2>&1 || true)
	rm -rf "$MNT/var/tmp/rxe-de-probe"
	if grep -q 'Metadaten.*fehlgeschlagen' <<<"$ger" && ! grep -q 'Failed to download metadata' <<<"$ger"; then
		t_pass
		grep -m1 'Metadaten.*fehlgeschlagen' <<<"$ger" | sed -E 's#file://[^ ]*#<repo>#g' | cut -c1-200 | sed 's/^/     dnf5: /'
	else
		t_fail "dnf5 does not answer in German under LANG=de_DE.UTF-8: $(grep -v '^[[:space:]]*$' <<<"$ger" | tail -n2 | tr '\n' ' ' | cut -c1-300)"
	fi
fi
t_start "$F: translated locale (LANG=de_DE.UTF-8 LANGUAGE=de) beside a broken third-party repository: rxe-kvfix-fetch --fedora still fetches kernel-$UP from the repository"
in_ct dnf5 -q clean all >/dev/null 2>&1 || true
rm -rf "$MNT/var/tmp/rxe-bad-cache"
rc=0
out=$(in_ct "${de[@]}" "$FETCH" --fedora --cache /var/tmp/rxe-bad-cache "$B" "$UP" 2>&1) || rc=$?
if ((rc == 0)) && [[ -f $MNT/var/tmp/rxe-bad-cache/kernel-$UP.rxe.tar.xz ]] && grep -q 'ignored the repositories dnf5 could not read' <<<"$out"; then
	t_pass
else
	t_fail "exit $rc: $(grep -E '^rxe-kvfix-fetch|fehlgeschlagen' <<<"$out" | tail -n2 | tr '\n' ' ' | sed -E 's#/srv/[^ ]*#<repo>#g' | cut -c1-400)"
fi
t_start "$F: translated locale, the repository no longer indexes kernel-$NVR, a broken third-party repository beside it: taken from Koji's package layout (simulated), archive=koji"
mv "$SRC/kernel-$NVR.src.rpm" "$W/indexed.src.rpm"
in_mnt createrepo_c -q --update "$R/source" >/dev/null
in_ct dnf5 -q clean all >/dev/null 2>&1 || true
rm -rf "$MNT$KC"
koji_fetch_de() {
	rc=0
	out=$(in_ct "${de[@]}" "$FETCH" --fedora --cache "$KC" "$B" "$NVR" 2>&1) || rc=$?
	prov=$(cat "$MNT$KC/kernel-$NVR.rxe.tar.xz.provenance" 2>/dev/null || true)
}
koji_fetch_de
if ((rc == 0)) && grep -qx 'archive=koji' <<<"$prov" && grep -q 'signatures OK' <<<"$prov"; then
	t_pass
else
	t_fail "exit $rc: $(grep '^rxe-kvfix-fetch' <<<"$out" | tail -n3 | tr '\n' ' ' | cut -c1-600)"
fi
mv "$W/indexed.src.rpm" "$SRC/kernel-$NVR.src.rpm"
in_mnt createrepo_c -q --update "$R/source" >/dev/null
rm -rf "$MNT$KC" "$MNT/var/tmp/rxe-bad-cache" "$MNT/srv/rxe-test-empty-repo" "$MNT/etc/yum.repos.d/rxe-third-party.repo" "$MNT/root/i18n"
in_ct dnf5 -q clean all >/dev/null 2>&1 || true

# --- 4d. /tmp a small tmpfs (Fedora's /tmp is one): the source RPM is unpacked on disk
t_start "$F: /tmp a 64 KiB tmpfs (kernel-$NVR.src.rpm is $(($(stat -c %s "$W/good.src.rpm") / 1024)) KiB): rxe-kvfix-fetch --fedora unpacks it outside /tmp and keeps it"
rm -rf "$MNT$KC"
rc=0
# shellcheck disable=SC2016 # expanded by the inner sh
out=$(in_ct unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs /tmp && "$@"' _ "$FETCH" --fedora --cache "$KC" "$B" "$NVR" 2>&1) || rc=$?
if ((rc == 0)) && [[ -f $MNT$KC/kernel-$NVR.rxe.tar.xz ]]; then
	t_pass
else
	t_fail "exit $rc: $(grep '^rxe-kvfix-fetch' <<<"$out" | tail -n2 | tr '\n' ' ' | cut -c1-400)"
fi
# (the server stays up for 6)
rm -rf "$MNT$KC" "$MNT/etc/koji.conf.d/rxe-test.conf" "$MNT/var/tmp/rxe-test-key.asc"
in_ct rpm -e --allmatches gpg-pubkey >/dev/null 2>&1 || true

# --- 5. the kernel removed: its record and kept source forgotten ------------------
t_start "$F: dnf5 remove kernel-$NVR: its %preun kernel-install remove $B exits 0, every plugin after ours runs, its record and kept source are gone"
rc=0
out=$(in_ct dnf5 -y remove "kernel-$NVR" 2>&1) || rc=$?
later=$(plugins_after_ours "$out")
if ((rc == 0)) && [[ -n $later && ! -e $MNT/var/lib/rxe-kvfix/status/$B && ! -e $PROV ]] &&
	[[ -z $(find "$MNT/var/cache/rxe-kvfix/sources" -name "kernel-$UP.rxe.tar.xz*" 2>/dev/null) ]]; then
	t_pass
	echo "     plugins run after 41-rxe-kvfix: $later"
else
	t_fail "exit $rc, later '$later', record: $(find "$MNT/var/lib/rxe-kvfix/status/" -type f 2>&1 | tr '\n' ' '), kept: $(find "$MNT/var/cache/rxe-kvfix/sources" -type f 2>/dev/null | tr '\n' ' '): $(tail -n3 <<<"$out" | tr '\n' ' ' | cut -c1-300)"
fi

# --- 6. Fedora-named kernels end to end (tests/pkg/fedora-named.sh) ---------------
# shellcheck source=tests/pkg/fedora-named.sh
. "$HERE/fedora-named.sh"

in_ct systemctl poweroff >/dev/null 2>&1 || true
for _ in $(seq 30); do
	kill -0 "$NSPAWN" 2>/dev/null || break
	sleep 1
done
LEADER=''
kill -0 "$NSPAWN" 2>/dev/null && kill -KILL "$NSPAWN" 2>/dev/null
wait "$NSPAWN" 2>/dev/null || true
rxe_chroot_api_mount "$MNT"
exit $((T_FAILS > 0))
