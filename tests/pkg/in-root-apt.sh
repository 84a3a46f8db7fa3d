#!/usr/bin/env bash
# in-root-apt.sh: install the rxe-kvfix Debian packages with apt inside a build
# root (chroot, as root, offline: every dependency is already installed), check
# what DKMS built for every kernel of the root, then purge them and check that
# nothing of ours is left.
#
#   in-root-apt.sh [--phase install|lifecycle|purge|all] SRC ROOTNAME SIGNER DEBDIR RELEASE:EXPECT...
#
# --phase install stops before the purge and --phase purge starts there, so that
# tests/pkg/run can keep the installed state in between (the VM scenarios start from
# it: each kernel's module is built by DKMS once per run). Default: all.
# --phase lifecycle: the packages' life after the install, a results line a step
# (tests/pkg/lifecycle-lib.sh: which version DKMS has, what every kernel's rdma_rxe
# resolves to, how many builds ran, dpkg --audit empty): apt-get install of
# rxe-kvfix-dkms one version higher (DEBDIR/bump), apt-get install --reinstall of it,
# apt-get install --allow-downgrades of DEBDIR's, apt-get remove, apt-get install again.
# The purge phase then ends the life.
#
# SRC: copy of the checkout (for tests/testlib.sh and META); SIGNER: the
# common name the MOK placed for DKMS carries (modinfo -F signer must say it);
# DEBDIR: holds rxe-kvfix-dkms_*.deb and rxe-verify_*.deb.
set -euo pipefail

usage() { echo "Usage: in-root-apt.sh [--phase install|lifecycle|purge|all] SRC ROOTNAME SIGNER DEBDIR RELEASE:EXPECT..."; }
[[ ${1:-} != -h && ${1:-} != --help ]] || {
	usage
	exit 0
}
PHASE=all
if [[ ${1:-} == --phase ]]; then
	case ${2:-} in install | lifecycle | purge | all) PHASE=$2 ;; *)
		usage >&2
		exit 2
		;;
	esac
	shift 2
fi
(($# >= 5)) || {
	usage >&2
	exit 2
}
SRC=$1 ROOTNAME=$2 SIGNER=$3 DEBDIR=$4
shift 4

# shellcheck source=tests/testlib.sh
. "$SRC/tests/testlib.sh"
t_suite pkg
M=rxe-kvfix
# shellcheck source=kmod/rxe-kvfix-lib.sh
. "$SRC/kmod/rxe-kvfix-lib.sh"
# shellcheck source=tests/pkg/lifecycle-lib.sh
. "$SRC/tests/pkg/lifecycle-lib.sh"
VER=$(rxe_kvfix_meta_version "$SRC")
LOG=/tmp/in-root-apt.log
[[ $PHASE == purge || $PHASE == lifecycle ]] || : >"$LOG"
export DEBIAN_FRONTEND=noninteractive

resolved() { modinfo -k "$1" -n rdma_rxe 2>/dev/null; }
ours() { find "/lib/modules/$1/updates" "/lib/modules/$1/extra" -name 'rdma_rxe.ko*' 2>/dev/null; }
installed() { [[ $(dpkg-query -W -f '${db:Status-Abbrev}' "$1" 2>/dev/null) == [ih]* ]]; }
# boot_unit_wants: the enablement link of rxe-verify-boot.service (its WantedBy
# target's .wants/ entry), empty when the package ships no such unit
boot_unit_wants() {
	local unit
	unit=$(find /usr/lib/systemd/system /lib/systemd/system -name rxe-verify-boot.service 2>/dev/null | head -n1)
	[[ -z $unit ]] || echo "/etc/systemd/system/$(sed -n 's/^WantedBy=//p' "$unit" | awk '{print $1}').wants/rxe-verify-boot.service"
}
fail_with_log() { t_fail "$1 ($(tail -n 3 "$LOG" | tr '\n' ' ' | cut -c1-300))"; }

lc_init apt "$@"
n=0
for spec; do [[ ${spec#*:} != affected-* ]] || n=$((n + 1)); done
UNITS=(rxe-kvfix-boot.service rxe-verify-boot.service)

if [[ $PHASE == lifecycle ]]; then
	new=("$DEBDIR"/bump/rxe-kvfix-dkms_*_all.deb)
	old=("$DEBDIR"/rxe-kvfix-dkms_*_all.deb)
	NEW=$(dpkg-deb -f "${new[0]}" Version) OLD=$(dpkg-deb -f "${old[0]}" Version)
	# shellcheck disable=SC2317 # run by lc_step
	apt_in() { (cd "$1" && shift && apt-get install -y --no-install-recommends "$@"); }
	lc_step "Version upgrade $OLD -> $NEW (apt-get install)" "${NEW%-*}" "$n" -- apt_in "$DEBDIR/bump" "./${new[0]##*/}" || true
	t_start "$ROOTNAME: after the upgrade exactly ${NEW%-*} is built and installed for every affected kernel, signed; nothing of $VER left"
	bad=''
	for spec in "$@"; do
		K=${spec%%:*}
		[[ ${spec#*:} == affected-* ]] || continue
		p=$(resolved "$K")
		[[ $(modinfo -F signer "$p" 2>/dev/null) == "$SIGNER" ]] || bad+=" $K:$p:signer=$(modinfo -F signer "$p" 2>&1)"
	done
	[[ ! -e /usr/src/$M-$VER && ! -e /var/lib/dkms/$M/$VER ]] || bad+=" $VER-tree-left"
	if [[ -z $bad ]]; then t_pass; else t_fail "${bad# }"; fi
	# dh_dkms's prerm unregisters the module on "upgrade" too, whatever the new
	# version (Debian's DKMS packaging): a reinstall builds every kernel again
	lc_step "reinstall $NEW (apt-get install --reinstall)" "${NEW%-*}" "$n" -- apt_in "$DEBDIR/bump" --reinstall "./${new[0]##*/}" || true
	lc_step "downgrade $NEW -> $OLD (apt-get install --allow-downgrades)" "${OLD%-*}" "$n" -- apt_in "$DEBDIR" --allow-downgrades "./${old[0]##*/}" || true
	lc_units "downgrade $NEW -> $OLD: the boot units still enabled" enabled "${UNITS[@]}"
	lc_step "remove (apt-get remove rxe-kvfix-dkms)" - 0 -- apt-get remove -y rxe-kvfix-dkms || true
	lc_step "install $OLD again after remove (apt-get install)" "${OLD%-*}" "$n" -- apt_in "$DEBDIR" "./${old[0]##*/}" || true
	lc_units "install $OLD again after remove: the boot units enabled" enabled "${UNITS[@]}"
	exit $((T_FAILS > 0))
fi

if [[ $PHASE != purge ]]; then
	# offline: every dependency is in the root already, so apt installs exactly
	# our two packages and nothing else (it would have to download anything more)
	# README's prerequisites as typed, $(uname -r) being this root's first kernel (in a
	# chroot uname -r is the host's): already installed, so apt changes nothing (offline)
	K0=${1%%:*}
	t_start "$ROOTNAME: README's apt install dkms linux-headers-\$(uname -r) (for $K0): exit 0, nothing to change"
	# (apt 3 sums up as "Upgrading: 0, Installing: 0, Removing: 0", apt 2 as "0 upgraded, ...")
	if out=$(apt install dkms "linux-headers-$K0" </dev/null 2>&1) &&
		grep -qE '^0 upgraded, 0 newly installed, 0 to remove|^ *Upgrading: 0, Installing: 0, Removing: 0' <<<"$out"; then
		t_pass
	else
		t_fail "$(tail -n 3 <<<"$out" | tr '\n' ' ' | cut -c1-300)"
	fi
	# as README's "Install" says: apt-get install ./FILE.deb... in their directory
	debs=()
	for d in "$DEBDIR"/rxe-kvfix-dkms_*.deb "$DEBDIR"/rxe-verify_*.deb; do debs+=("./$(basename "$d")"); done
	t_start "$ROOTNAME: apt-get install ${debs[*]} (nothing else)"
	lc_begin
	rc=0
	(cd "$DEBDIR" && apt-get install -y --no-install-recommends "${debs[@]}") >"$LOG.install" 2>&1 || rc=$?
	cat "$LOG.install" >>"$LOG"
	if ((rc == 0)) && grep -q '^0 upgraded, 2 newly installed, 0 to remove' "$LOG" &&
		installed rxe-kvfix-dkms && installed rxe-verify; then
		t_pass
		grep -E '^Building for|^Building initial module|^Error|rxe-kvfix-dkms' "$LOG" | sed 's/^/     /' || true
	else
		fail_with_log "apt-get install failed"
		exit 1
	fi
	lc_end "install $VER (apt-get install)" "$VER" "$n" "$rc" "$(tail -n 5 "$LOG.install")"
	lc_units "install $VER (apt-get install): the boot units enabled" enabled "${UNITS[@]}"

	for spec in "$@"; do
		K=${spec%%:*} E=${spec#*:}
		case $E in
		affected-*)
			path=$(resolved "$K")
			t_start "$K: modinfo -n resolves to the DKMS module"
			if [[ $path == "/lib/modules/$K/updates/dkms/rdma_rxe.ko"* ]]; then t_pass; else
				t_fail "modinfo -n rdma_rxe is '$path' ($(dkms status "$M" 2>&1 | tr '\n' ' '))"
				continue
			fi
			t_start "$K: vermagic, and the module identifies itself as rxe-kvfix"
			vm=$(modinfo -F vermagic "$path" | awk '{print $1}')
			v=$(modinfo -F version "$path")
			if [[ $vm == "$K" && $v == "$VER-rxe-kvfix" ]]; then t_pass; else t_fail "vermagic '$vm', version '$v'"; fi
			t_start "$K: DKMS signed the module with the MOK ($SIGNER)"
			s=$(modinfo -F signer "$path" 2>/dev/null || true)
			if [[ $s == "$SIGNER" ]]; then t_pass; else t_fail "modinfo -F signer says '$s'"; fi
			;;
		unaffected | fixed)
			# the package's postinst builds every kernel in turn: DKMS reports the
			# skip (PRE_BUILD exit 77) and the install goes on; the reason is in
			# make.log of that build, which the next kernel's build replaces, so
			# it is read back the way a user would: dkms build -k K again
			t_start "$K: skipped ($E), with the reason, its own module stays"
			mklog=/var/lib/dkms/$M/$VER/build/make.log
			p=$(resolved "$K")
			brc=0
			dkms build "$M/$VER" -k "$K" >>"$LOG" 2>&1 || brc=$?
			if [[ -n $(ours "$K") || $p != "/lib/modules/$K/kernel/"* ]]; then
				t_fail "a module of ours is installed or modinfo -n is '$p'"
			elif ! awk -v h="Building initial module $M/$VER for $K" '{sub(/\r$/, "")} $0 == h {f = 1; next} /^Building initial module / {f = 0} f' "$LOG" |
				grep -c 'bad exit status: 77' >/dev/null; then
				t_fail "the install did not report a skip (exit 77) for $K"
			elif ((brc != 77)); then
				t_fail "dkms build -k $K exited $brc, not 77"
			elif ! reason=$(grep -h "rxe-kvfix-prepare: kernel $K" "$mklog" | grep -m1 "not affected, skipping\|already allocates"); then
				t_fail "no skip reason for $K in $mklog"
			else
				t_pass
				echo "     reason shown: $reason"
			fi
			;;
		*) t_fail "$K: matrix" "unknown expectation '$E'" ;;
		esac
	done

	t_start "$ROOTNAME: rxe-verify runs from the package"
	out=$(rxe-verify --help 2>&1) || true
	if ! grep -q 'doctor' <<<"$out"; then
		t_fail "rxe-verify --help: $(tail -n1 <<<"$out")"
	elif [[ ! -f /usr/share/man/man1/rxe-verify.1.gz ]]; then
		t_fail "no /usr/share/man/man1/rxe-verify.1.gz"
	else
		t_pass
	fi

	wants=$(boot_unit_wants)
	if [[ -n $wants ]]; then
		t_start "$ROOTNAME: rxe-verify-boot.service is enabled"
		if [[ $wants != */.wants/* && -L $wants ]]; then t_pass; else t_fail "no $wants (the unit's WantedBy)"; fi
	else
		t_skip "$ROOTNAME: rxe-verify-boot.service is enabled" "this source has no rxe-verify-boot unit"
	fi

fi
[[ $PHASE != install ]] || exit $((T_FAILS > 0))
wants=$(boot_unit_wants)

# a result as the boot check leaves it: purge must remove it too
mkdir -p /var/lib/rxe-verify/test-release && echo pass >/var/lib/rxe-verify/test-release/verdict

t_start "$ROOTNAME: apt-get purge rxe-kvfix-dkms rxe-verify"
lc_begin
rc=0
apt-get purge -y rxe-kvfix-dkms rxe-verify >"$LOG.purge" 2>&1 || rc=$?
cat "$LOG.purge" >>"$LOG"
if ((rc == 0)); then t_pass; else fail_with_log "apt-get purge failed"; fi
lc_end "purge (apt-get purge)" - 0 "$rc" "$(tail -n 5 "$LOG.purge")"

t_start "$ROOTNAME: after purge the stock module resolves for every kernel"
bad=''
for spec in "$@"; do
	K=${spec%%:*}
	p=$(resolved "$K")
	[[ $p == "/lib/modules/$K/kernel/drivers/"* && -f $p ]] || bad+=" $K:$p"
done
if [[ -z $bad ]]; then t_pass; else t_fail "modinfo -n rdma_rxe:$bad"; fi

t_start "$ROOTNAME: after purge nothing of ours is left"
left=()
for f in /usr/src/"$M"-* /var/lib/dkms/"$M" /var/lib/rxe-verify /etc/rxe-verify /usr/libexec/rxe-verify /usr/bin/rxe-verify "$wants" \
	/var/lib/rxe-kvfix /usr/lib/rxe-kvfix /etc/rxe-kvfix /etc/kernel/postinst.d/dkms-rxe-kvfix /etc/kernel/header_postinst.d/dkms-rxe-kvfix \
	/etc/kernel/postrm.d/rxe-kvfix /usr/lib/kernel/install.d/41-rxe-kvfix.install /var/cache/rxe-kvfix/sources/*.provenance /var/cache/rxe-kvfix/sources/.memo \
	/usr/lib/systemd/system/rxe-kvfix-boot.service /lib/systemd/system/rxe-kvfix-boot.service \
	/etc/systemd/system/multi-user.target.wants/rxe-kvfix-boot.service; do
	[[ ! -e $f && ! -L $f ]] || left+=("$f")
done
for spec in "$@"; do
	mapfile -t -O "${#left[@]}" left < <(ours "${spec%%:*}")
done
for p in rxe-kvfix-dkms rxe-verify; do
	# purged: unknown to dpkg, or at most "pn" (known, not installed)
	st=$(dpkg-query -W -f '${db:Status-Abbrev}' "$p" 2>/dev/null || true)
	[[ -z $st || ${st:1:1} == n ]] || left+=("dpkg:$p=$st")
done
if ((${#left[@]} == 0)); then t_pass; else t_fail "left behind: ${left[*]}"; fi
exit $((T_FAILS > 0))
