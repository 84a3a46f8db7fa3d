#!/usr/bin/env bash
# in-root-kernel-upgrade.sh: a new kernel series reaches a Debian host that runs
# rxe-kvfix (installed from the .deb by in-root-apt.sh), the way an admin gets it:
# apt-get install of the kernel's image and headers, nothing else typed. Run inside
# the primary kernel's build root (chroot), after in-root-apt.sh's install.
#
#   in-root-kernel-upgrade.sh SRC RELEASE VERSION SUITE
#
# RELEASE (VERSION, from SUITE): a kernel of another series than the root's, whose
# source the root does not have (vmhost/kernels.tsv role series-upgrade). The root
# gets a real initramfs generator first (initramfs-tools; the build roots have none,
# vm-run makes its own), so that "the hooks after dkms ran" is a file: the kernel's
# initrd.img.
#
# A. fetching impossible (fetch=never in /etc/rxe-kvfix/rxe-kvfix.conf): apt-get
#    exits 0, dpkg --audit is empty, /boot/initrd.img-RELEASE exists, DKMS stepped
#    aside with the failure recorded in /var/lib/rxe-kvfix/status/RELEASE (one line
#    naming the file to fetch elsewhere and where to put it), printed by the kernel
#    hook in apt's output; the in-tree rdma_rxe is the one modprobe resolves.
# B. the same kernel through kernel-install remove + add: exit 0, every plugin after
#    40-dkms.install ran (41-rxe-kvfix printed the line, the initrd was made again).
# C. the repair once the source can be had (fetch=auto): what rxe-kvfix-boot.service
#    runs at boot (rxe-kvfix-kernel-hook boot, here for RELEASE through the test hook
#    RXE_KVFIX_RELEASE: a chroot boots nothing) builds it from the fetched source; run
#    again, it sees the module installed and does nothing.
#    The cache keeps only the rxe source and its provenance; the figures (fetch and
#    extract seconds, bytes downloaded and kept) are printed.
# status: one kernel rebuilt by DKMS from a source that has the fix (simulated source:
#    its headers' Makefile and rxe-kvfix's patched rxe directory; real DKMS and prepare
#    step aside, not-needed); rxe-kvfix status then shows it, the built kernels and
#    RELEASE not fixed with its line, exit 1; its --json is kept for tests/pkg/run to
#    validate. rxe-kvfix fetch RELEASE with fetch=never fails with the line of what to
#    do, and after C says where the kept source is.
# D. apt-get purge of the kernel with a second flavour of its package version
#    installed (simulated: a package of ours named as a kernel image): exit 0, its
#    record gone, its kept source kept for the flavour, status without its row; the
#    flavour's purge then removes the kept source.
# The same kernel installed with fetch=auto (the default), rxe-kvfix fetched and built
# inside that apt-get command, then booted, is tests/vm/scenarios.d/85-series.
set -euo pipefail

usage() { echo "Usage: in-root-kernel-upgrade.sh SRC RELEASE VERSION SUITE"; }
[[ ${1:-} != -h && ${1:-} != --help ]] || {
	usage
	exit 0
}
(($# == 4)) || {
	usage >&2
	exit 2
}
SRC=$1 K=$2 KV=$3 SUITE=$4

# shellcheck source=tests/testlib.sh
. "$SRC/tests/testlib.sh"
t_suite pkg-kernel-upgrade
LOG=/tmp/in-root-kernel-upgrade.log
: >"$LOG"
export DEBIAN_FRONTEND=noninteractive
STATUS=/var/lib/rxe-kvfix/status/$K
CONF=/etc/rxe-kvfix/rxe-kvfix.conf
CACHE=/var/cache/rxe-kvfix/sources
XY=$(cut -d. -f1,2 <<<"$K")
conf() { mkdir -p "${CONF%/*}" && printf '# rxe-kvfix test: %s\nfetch=%s\n' "$2" "$1" >"$CONF"; }
# apt_kernel VERB LOGFILE: apt-get VERB of the kernel's image and headers (purge: of
# every package of the kernel)
apt_kernel() {
	local rc=0
	step "apt-get $1 linux-image-$K linux-headers-$K"
	if [[ $1 == install ]]; then
		apt-get install -y -q "linux-image-$K=$KV" "linux-headers-$K=$KV" >"$2" 2>&1 || rc=$?
	else
		# every package of the kernel: Debian 13's image is linux-image-K over
		# linux-binary-K, linux-modules-K and linux-base-K, which a purge of the image
		# and headers alone leaves installed (the kernel's modules still there)
		local pkgs
		mapfile -t pkgs < <(dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' "linux-*-$K" 2>/dev/null | awk '$1 ~ /^[ih]/ { print $2 }')
		step "apt-get $1 ${pkgs[*]}"
		apt-get "$1" -y -q "${pkgs[@]}" >"$2" 2>&1 || rc=$?
	fi
	cat "$2" >>"$LOG"
	return "$rc"
}
audit_clean() {
	local a
	a=$(dpkg --audit 2>&1 || true)
	[[ -z $a ]] || {
		echo "dpkg --audit: $(tr '\n' ' ' <<<"$a" | cut -c1-300)"
		return 1
	}
}
resolves() { modinfo -k "$K" -n rdma_rxe 2>/dev/null; }
fail_with_log() { t_fail "$1 ($(tail -n 3 "$LOG" | tr '\n' ' ' | cut -c1-300))"; }
step() { echo "=== $*" >>"$LOG"; }

t_start "setup: rxe-kvfix registered with DKMS, $SUITE reachable, initramfs-tools installed"
# (captured first: grep -q would leave dkms writing into a closed pipe, and pipefail
# would count that as no match)
registered=$(dkms status rxe-kvfix 2>/dev/null || true)
if [[ -z $registered ]]; then
	t_fail "rxe-kvfix is not registered with DKMS (install rxe-kvfix-dkms: in-root-apt.sh --phase install)"
	exit 1
fi
t_apt_add_suite "" "$SUITE" kernel-upgrade
# a small initramfs (only the modules listed): the point is that the hook ran
mkdir -p /etc/initramfs-tools/conf.d
printf 'MODULES=list\nCOMPRESS=zstd\n' >/etc/initramfs-tools/conf.d/rxe-kvfix-test
t0=$SECONDS
step "apt-get update; apt-get install initramfs-tools"
if apt-get -q update >>"$LOG" 2>&1 && apt-get install -y -q initramfs-tools >>"$LOG" 2>&1; then
	t_pass
	echo "     apt-get update + initramfs-tools: $((SECONDS - t0)) s"
else
	fail_with_log "apt-get failed"
	exit 1
fi

# --- A. fetching impossible: the kernel installs all the same
conf never "fetching impossible"
t_start "A: apt-get install linux-image-$K linux-headers-$K with fetch=never: exit 0"
t0=$SECONDS
if apt_kernel install "$LOG.A"; then
	t_pass
	echo "     apt-get install: $((SECONDS - t0)) s"
else
	t_fail "apt-get exited non-zero: $(grep -E 'rror|dpkg:' "$LOG.A" | tail -n 3 | tr '\n' ' ' | cut -c1-300)"
fi
t_check "A: dpkg --audit: nothing half-configured" audit_clean
t_start "A: the hooks after dkms ran: /boot/initrd.img-$K exists"
if [[ -s /boot/initrd.img-$K ]]; then
	t_pass
else
	t_fail "no /boot/initrd.img-$K; hooks: $(find /etc/kernel/postinst.d -mindepth 1 -printf "%f ")"
fi
t_start "A: DKMS stepped aside; one recorded line names the file to fetch and where to put it"
msg=$(sed -n 's/^message=//p' "$STATUS" 2>/dev/null || true)
if ! grep -qx 'state=failed' "$STATUS" 2>/dev/null; then
	t_fail "$STATUS: $(tr '\n' ' ' <"$STATUS" 2>&1)"
elif [[ $msg != *"no source of kernel $K"*"fetch=never"*"apt-get download linux-source-$XY=$KV"*"$CACHE/"* ]]; then
	t_fail "the recorded line does not say what is missing, what to fetch and where to put it: $msg"
else
	t_pass
	echo "     $STATUS: $msg"
fi
t_start "A: apt's output shows the kernel hook's line"
hook=$(grep -m1 "^rxe-kvfix: kernel $K: NOT BUILT" "$LOG.A" || true)
if [[ -n $hook ]]; then
	t_pass
	echo "     $(cut -c1-240 <<<"$hook")"
else t_fail "no 'rxe-kvfix: kernel $K: NOT BUILT' line in apt's output"; fi
t_start "A: the stock module stays usable: modinfo -n resolves the in-tree rdma_rxe of $K"
p=$(resolves || true)
if [[ $p == "/lib/modules/$K/kernel/"* && -f $p ]] && ! find "/lib/modules/$K/updates" -name 'rdma_rxe.ko*' 2>/dev/null | grep -q .; then
	t_pass
else
	t_fail "modinfo -k $K -n rdma_rxe: $p"
fi

# --- B. kernel-install remove + add: the plugins after 40-dkms run, ours among them
if command -v kernel-install >/dev/null; then
	t_start "B: kernel-install remove + add $K: exit 0, 40-dkms, 41-rxe-kvfix and the plugins after them ran"
	step "kernel-install remove/add $K"
	rm -f "/boot/initrd.img-$K"
	krc=0
	{ kernel-install -v remove "$K" && kernel-install -v add "$K" "/boot/vmlinuz-$K"; } >"$LOG.B" 2>&1 || krc=$?
	cat "$LOG.B" >>"$LOG"
	plugins=$(grep -oE '[0-9]{2}-[0-9A-Za-z_.-]+\.install' "$LOG.B" | awk '!seen[$0]++' | tr '\n' ' ')
	if ((krc != 0)); then
		t_fail "kernel-install exited $krc: $(tail -n 3 "$LOG.B" | tr '\n' ' ' | cut -c1-300)"
	elif [[ $plugins != *40-dkms.install*41-rxe-kvfix.install*50-depmod.install* ]]; then
		t_fail "40-dkms, 41-rxe-kvfix and 50-depmod not all run, in order: $plugins"
	elif ! grep -q "^rxe-kvfix: kernel $K: NOT BUILT" "$LOG.B"; then
		t_fail "41-rxe-kvfix.install did not print the recorded line"
	else
		t_pass
		echo "     plugins run: $plugins"
	fi
else
	t_skip "B: kernel-install remove + add $K" "no kernel-install in this root (systemd's)"
fi

# --- rxe-kvfix status on this root's kernels: one fixed (rdma_rxe is rxe-kvfix's), one
# that needs no fix, one not built with its line. The kernel needing no fix: the
# upgrade-from kernel rebuilt by DKMS from a source that already has the fix, as a
# kernel looks once upstream lands it: its headers' top Makefile and the rxe directory
# rxe-kvfix prepared (patched) for it, given as --kernel-tree (simulated source, real
# DKMS and prepare: they step aside and record not-needed).
ADMIN=/usr/lib/rxe-kvfix/rxe-kvfix
NN=$(find /lib/modules -mindepth 1 -maxdepth 1 -printf '%f\n' | grep -vxF "$K" | sort -V | head -n1)
t_start "status: $NN rebuilt by DKMS from a source that has the fix: it steps aside, recorded not-needed"
step "dkms remove + install $NN from a fixed source"
DV=$(dkms status -m rxe-kvfix 2>/dev/null | sed -n 's|^rxe-kvfix/\([^,:]*\)[,:].*|\1|p' | head -n1)
FX=/tmp/rxe-kvfix-fixed-tree
rm -rf "$FX" && mkdir -p "$FX/drivers/infiniband/sw/rxe"
nrc=0
# the top Makefile (Debian: in the -common headers; the flavour's includes it)
mk=$(readlink -f "/lib/modules/$NN/build")/Makefile
grep -q '^VERSION = ' "$mk" 2>/dev/null || mk=/usr/src/linux-headers-${NN%-*}-common/Makefile
if cp "$mk" "$FX/" 2>/dev/null; then
	"/usr/src/rxe-kvfix-$DV/kmod/rxe-kvfix-prepare" -q --no-fetch --out /tmp/rxe-kvfix-nn-src "$NN" >>"$LOG" 2>&1 || nrc=$?
	cp -a /tmp/rxe-kvfix-nn-src/. "$FX/drivers/infiniband/sw/rxe/" 2>/dev/null || nrc=1
	{ dkms remove "rxe-kvfix/$DV" -k "$NN" && RXE_KVFIX_KERNEL_TREE=$FX dkms install "rxe-kvfix/$DV" -k "$NN"; } >>"$LOG" 2>&1 || true
else
	nrc=1
fi
if ((nrc == 0)) && [[ $(sed -n 's/^state=//p' "/var/lib/rxe-kvfix/status/$NN" 2>/dev/null) == not-needed ]]; then
	t_pass
else
	fail_with_log "prepare exit $nrc, record: $(tr '\n' ' ' <"/var/lib/rxe-kvfix/status/$NN" 2>&1)"
fi
t_start "status: rxe-kvfix status shows $NN not needed, the others fixed, $K not fixed with its line; exit 1"
src=0
out=$("$ADMIN" status 2>&1) || src=$?
echo "$out" >>"$LOG"
row() { # RELEASE: its row of $out
	local re=${1//./\\.}
	grep -E "^${re//+/\\+}( \*)? " <<<"$out" || true
}
bad=''
[[ $(row "$NN") == *"not affected"*in-tree*not-needed* || $(row "$NN") == *fixed*in-tree*not-needed* ]] || bad+="$NN: '$(row "$NN")' "
for k in $(find /lib/modules -mindepth 1 -maxdepth 1 -printf '%f\n' | grep -vxF -e "$K" -e "$NN"); do
	[[ $(row "$k") == *affected*"rxe-kvfix "*built* ]] || bad+="$k: '$(row "$k")' "
done
[[ $(row "$K") == *in-tree*failed* ]] || bad+="$K: '$(row "$K")' "
grep -qF "  $K: no source of kernel $K" <<<"$out" || bad+="no line of what to do for $K "
if ((src == 1)) && [[ -z $bad ]]; then
	t_pass
	while IFS= read -r l; do printf '     %s\n' "$l"; done <<<"$out"
else
	t_fail "exit $src; $bad"
fi
"$ADMIN" status --json >/tmp/rxe-kvfix-status-A.json 2>>"$LOG" || true

t_start "fetch: rxe-kvfix fetch $K with fetch=never: exit 1, the line of what to do"
frc=0
out=$("$ADMIN" fetch "$K" 2>&1) || frc=$?
if ((frc == 1)) && grep -q "error: no source of kernel $K here, and fetch=never" <<<"$out"; then
	t_pass
else
	t_fail "exit $frc: $(tr '\n' ' ' <<<"$out" | cut -c1-300)"
fi

# --- C. the repair, once the source can be had
conf auto "the default"
t_start "C: fetch=auto, then the boot-time repair (rxe-kvfix-kernel-hook boot) builds it from the fetched source"
step "rxe-kvfix-kernel-hook boot for $K"
crc=0
hook=$(command -v /usr/lib/rxe-kvfix/rxe-kvfix-kernel-hook || echo "$SRC/kmod/rxe-kvfix-kernel-hook")
RXE_KVFIX_RELEASE=$K "$hook" boot >"$LOG.C" 2>&1 || crc=$?
cat "$LOG.C" >>"$LOG"
p=$(resolves || true)
if ((crc == 0)) && grep -qx 'state=built' "$STATUS" 2>/dev/null && [[ $p == "/lib/modules/$K/updates/dkms/"* ]] &&
	grep -q "built and installed rxe-kvfix for $K" "$LOG.C"; then
	t_pass
	echo "     $(sed -n 's/^message=//p' "$STATUS")"
else
	t_fail "exit $crc, modinfo -n $p, $(tr '\n' ' ' <"$STATUS" 2>&1 | cut -c1-300); $(tail -n 2 "$LOG.C" | tr '\n' ' ')"
fi
t_start "C: the cache keeps only the rxe source and its provenance"
kept=$CACHE/linux-source-${XY}_$KV.tar.xz
if [[ ! -s $kept || ! -s $kept.provenance ]]; then
	t_fail "no $kept (and .provenance): $(ls "$CACHE")"
elif (($(stat -c %s "$kept") > 4 * 1024 * 1024)); then
	t_fail "$kept is $(stat -c %s "$kept") bytes: more than the rxe directory"
else
	t_pass
	echo "     $(tr '\n' ' ' <"$kept.provenance")"
fi
# the figures (a measurement, not a threshold), from prepare's line in DKMS's log
stats=$(grep -ho 'fetch_s=[^ ]* extract_s=[^ ]* downloaded_bytes=[0-9]* kept_bytes=[0-9]*' /var/lib/dkms/rxe-kvfix/*/"$K"/*/log/make.log 2>/dev/null | head -n1)
build_s=$(awk '/^Running the pre_build script/ { f = 1 } f && /^# elapsed time:/ { print $4; exit }' /var/lib/dkms/rxe-kvfix/*/"$K"/*/log/make.log 2>/dev/null)
echo "     figures: $K: ${stats:-no fetch figures} pre_build(fetch+extract+build)=${build_s:-?}"
t_start "C: the repair again: the module is there, nothing is built"
crc=0
out=$(RXE_KVFIX_RELEASE=$K "$hook" boot 2>&1) || crc=$?
if ((crc == 0)) && [[ -z $out ]]; then t_pass; else t_fail "exit $crc: $out"; fi

t_start "fetch: rxe-kvfix fetch $K once its source is kept: exit 0, says where it is"
frc=0
out=$("$ADMIN" fetch "$K" 2>&1) || frc=$?
if ((frc == 0)) && [[ $out == *"kernel $K: its source is here (cache, affected (kzalloc_objs)), kept as $CACHE/linux-source-${XY}_$KV.tar.xz"* ]]; then
	t_pass
else
	t_fail "exit $frc: $(tr '\n' ' ' <<<"$out" | cut -c1-300)"
fi

# --- D. removal, with another flavour of the same package version installed (a
# package of ours named as a kernel image, holding only /lib/modules/RELEASE/kernel,
# whose postrm runs /etc/kernel/postrm.d/rxe-kvfix as a kernel image's does:
# simulated; the sharing is decided by the package version dpkg reports for it)
FL=${K%-*}-rxetest-${K##*-}
step "dpkg -i linux-image-$FL=$KV (simulated flavour)"
FD=/tmp/rxe-kvfix-flavour
rm -rf "$FD" && mkdir -p "$FD/DEBIAN" "$FD/lib/modules/$FL/kernel"
printf 'Package: linux-image-%s\nVersion: %s\nArchitecture: all\nMaintainer: rxe-kvfix tests <tests@localhost>\nDescription: rxe-kvfix test: a second flavour of %s (simulated)\n' \
	"$FL" "$KV" "$K" >"$FD/DEBIAN/control"
# shellcheck disable=SC2016 # $1 is the postrm's own argument
printf '#!/bin/sh\nset -e\nif [ "$1" = remove ] && [ -x /etc/kernel/postrm.d/rxe-kvfix ]; then /etc/kernel/postrm.d/rxe-kvfix %s /boot/vmlinuz-%s; fi\n' \
	"$FL" "$FL" >"$FD/DEBIAN/postrm"
chmod 0755 "$FD/DEBIAN/postrm"
dpkg-deb -b "$FD" /tmp/rxe-kvfix-flavour.deb >>"$LOG" 2>&1 && dpkg -i /tmp/rxe-kvfix-flavour.deb >>"$LOG" 2>&1 ||
	echo "     (the simulated flavour did not install: see $LOG)"
t_start "D: apt-get purge of $K with flavour $FL of $KV installed: exit 0, its record gone, the kept source kept for $FL"
if ! apt_kernel purge "$LOG.D"; then
	t_fail "apt-get purge exited non-zero: $(tail -n 3 "$LOG.D" | tr '\n' ' ' | cut -c1-300)"
elif [[ -e $STATUS || -e $STATUS.log ]]; then
	t_fail "$STATUS is still there"
elif ! ls "$CACHE/linux-source-${XY}_$KV".tar.xz >/dev/null 2>&1; then
	t_fail "the kept source went, though $FL uses it: $(ls "$CACHE")"
elif ! audit_clean >/dev/null; then
	t_fail "$(audit_clean)"
else
	t_pass
fi
t_start "D: rxe-kvfix status after the purge: no row of $K, a row of $FL, every other kernel as before"
out=$("$ADMIN" status 2>&1) || true
echo "$out" >>"$LOG"
if [[ -z $(row "$K") && -n $(row "$FL") && -n $(row "$NN") ]]; then t_pass; else t_fail "$(tr '\n' '|' <<<"$out" | cut -c1-400)"; fi
"$ADMIN" status --json >/tmp/rxe-kvfix-status-D.json 2>>"$LOG" || true
t_start "D: dpkg --purge of flavour $FL: the kept source of $KV is gone with its last kernel"
step "dpkg --purge linux-image-$FL"
if ! dpkg --purge "linux-image-$FL" >>"$LOG" 2>&1; then
	fail_with_log "dpkg --purge failed"
elif ls "$CACHE/linux-source-${XY}_$KV".* >/dev/null 2>&1; then
	t_fail "the kept source is still there: $(ls "$CACHE")"
elif ! audit_clean >/dev/null; then
	t_fail "$(audit_clean)"
else
	t_pass
fi

exit $((T_FAILS > 0))
