# shellcheck shell=bash
# tests/vm/scenario-systemd.sh: sourced by tests/vm/scenarios. The post-upgrade check
# (rxe-verify-boot.service, userspace/systemd/) in the sid root booted with systemd as
# PID 1 (vm-run --systemd), twice with the same kernel:
#
#   1. the unit runs on the first boot of the kernel: PASS line in the journal, JSON
#      under /var/lib/rxe-verify/KERNEL/ (guest/systemd.sh first);
#   2. the second boot skips it (condition false) (guest/systemd.sh second); with
#      RXE_SYSTEMD_ANSIBLE=1 packaging/ansible/site.yml also runs in that guest with
#      connection local: install tasks unchanged, a passing verdict in the fleet table
#      (guest/systemd.sh second ansible; about 10 more minutes under TCG).
#
# The unit, script and config are installed into the overlay the way the package
# does: `cmake --install --component boot_check` with DESTDIR (prefix /usr), or, when
# RXE_DEB_DIR names a directory with the .debs of `make deb`, those packages with
# apt-get (their DKMS postinst then builds for every kernel of the root: minutes). A
# test-only unit makes the dummy netdev rxetest0 that boot.conf names.
# Uses $MNT, $OUT, $REPO and boot() of tests/vm/scenarios.

scenario_systemd() {
	local k=$1 t0=$SECONDS cfg debdir=${RXE_DEB_DIR:-} debs=() out
	t_start "$k systemd: boot check installed into the root as the package does"
	[[ -z $debdir ]] || mapfile -t debs < <(find "$debdir" -maxdepth 1 \( -name 'rxe-kvfix-dkms_*.deb' -o -name 'rxe-verify_*.deb' \) 2>/dev/null | sort)
	if ((${#debs[@]} >= 2)); then
		mkdir -p "$MNT/root/debs"
		cp "${debs[@]}" "$MNT/root/debs/"
		rxe_chroot_api_mount "$MNT"
		if out=$(chroot "$MNT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DEBIAN_FRONTEND=noninteractive \
			sh -c 'apt-get install -y --no-install-recommends /root/debs/*.deb' 2>&1); then
			t_pass
			echo "     installed $(cd "$MNT/root/debs" && echo *.deb)"
		else
			t_fail "apt-get install of ${debs[*]##*/} failed: $(tail -n2 <<<"$out" | tr '\n' ' ')"
		fi
		rxe_chroot_api_umount "$MNT"
	else
		cfg=$OUT/systemd-cmake
		if out=$( { cmake -S "$REPO" -B "$cfg" -DCMAKE_INSTALL_PREFIX=/usr -DRXE_BUILD_TESTS=OFF &&
			DESTDIR=$MNT cmake --install "$cfg" --component boot_check; } 2>&1); then
			t_pass
			echo "     RXE_DEB_DIR not given: installed with cmake --install --component boot_check, DESTDIR=$MNT"
		else
			t_fail "cmake --install: $(tail -n2 <<<"$out" | tr '\n' ' ')"
			return 0
		fi
	fi
	# the administrator's choice: the check may make an rxe device on rxetest0
	printf '\n# rxe-kvfix VM test\nRXE_VERIFY_BOOT_NETDEV=rxetest0\n' >>"$MNT/etc/rxe-verify/boot.conf"
	cat >"$MNT/etc/systemd/system/rxe-kvfix-test-netdev.service" <<'EOF'
# test only (tests/vm/scenario-systemd.sh): the dummy netdev that boot.conf names
[Unit]
Description=rxe-kvfix test: dummy netdev rxetest0 for rxe-verify-boot
Before=rxe-verify-boot.service network-online.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=ip link add rxetest0 type dummy
ExecStart=ip addr add 10.77.9.1/24 dev rxetest0
ExecStart=ip link set rxetest0 up

[Install]
WantedBy=multi-user.target
EOF
	t_check "$k systemd: systemctl enable rxe-verify-boot.service (and the test netdev unit)" \
		chroot "$MNT" systemctl enable rxe-verify-boot.service rxe-kvfix-test-netdev.service
	# test only: no login prompts (under TCG the serial getty waits tens of seconds
	# for dev-ttyS0.device)
	chroot "$MNT" systemctl mask -q getty.target getty-static.service 2>/dev/null ||
		rxe_log "systemctl mask getty.target failed in $MNT: the boots keep their gettys"

	local script=/root/rxe-kvfix/tests/vm/guest/systemd.sh
	BOOT_ARGS=--systemd BOOT_MEM=4G boot "systemd-first-$k" "$k" "$script" "$k" first
	# site.yml in the guest: each Ansible task costs 10-60 s under TCG (about 10 min
	# in all), so it runs only with RXE_SYSTEMD_ANSIBLE=1 (the evidence run)
	local ansible=()
	[[ ${RXE_SYSTEMD_ANSIBLE:-0} != 1 ]] || ansible=(ansible)
	BOOT_ARGS=--systemd BOOT_MEM=4G boot "systemd-second-$k" "$k" "$script" "$k" second "${ansible[@]}"
	echo "--- systemd scenario: $((SECONDS - t0))s in all"
}
