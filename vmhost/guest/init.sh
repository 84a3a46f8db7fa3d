#!/bin/sh
# rxe-kvfix guest init (PID 1 after switch_root), run by the static busybox that
# vmhost/vm-run puts at /run/rxe-kvfix/bin/busybox. Not systemd: mounts the API file
# systems, the results and extra 9p shares, runs the command from cmd.sh, records its
# exit status, dmesg and powers off. Everything here must work with busybox alone.
#
# vm-run --systemd (the control share holds a file "systemd"): after the mounts it
# writes a runtime unit and execs /lib/systemd/systemd as PID 1; that unit runs
# this script again as "guest-init.sh --command": wait until the boot has finished,
# run the command the same way, then systemctl poweroff.
# shellcheck disable=SC3040,SC3043
BB=/run/rxe-kvfix/bin/busybox
CTL=/run/rxe-kvfix/ctl
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb LANG=C.UTF-8
export RXE_GUEST_RESULTS=/results RXE_GUEST_LIB=$CTL/lib.sh

say() { echo "rxe-guest-init: [$($BB cut -d' ' -f1 /proc/uptime)] $*"; }
off() {
	$BB sync
	$BB umount /results 2>/dev/null
	echo o >/proc/sysrq-trigger
	$BB sleep 60
}
die() {
	say "FATAL: $*"
	off
}

UNIT=rxe-kvfix-vm-command.service

# run_command: the command from cmd.sh, output to the console and
# /results/output.log; its exit status, dmesg and guest-started in /results.
# Background processes it leaves behind would keep the pipe open: once the command
# has exited and the pipe has not drained within 3 s, they get SIGTERM, then SIGKILL
# (under systemd: left to the unit's stop, which kills the unit's processes).
run_command() {
	$BB cut -d' ' -f1 /proc/uptime >/results/guest-started
	say "kernel $($BB uname -r) up; running the command"
	$BB rm -f /tmp/.rxe-kvfix-rc
	(
		cd /
		$BB sh "$CTL/cmd.sh" </dev/null
		echo $? >/tmp/.rxe-kvfix-rc
	) 2>&1 | $BB tee /results/output.log &
	pipe=$!
	while [ ! -e /tmp/.rxe-kvfix-rc ] && $BB kill -0 "$pipe" 2>/dev/null; do
		$BB sleep 0.2
	done
	i=0
	while $BB kill -0 "$pipe" 2>/dev/null && [ $i -lt 15 ]; do
		$BB sleep 0.2
		i=$((i + 1))
	done
	if ! $BB kill -0 "$pipe" 2>/dev/null; then
		wait
	elif [ "$$" = 1 ]; then
		say "command left processes behind: killing them"
		$BB kill -TERM -1 2>/dev/null
		$BB sleep 1
		$BB kill -KILL -1 2>/dev/null
		wait
	else
		say "command left processes behind (systemd stops them with the unit)"
	fi
	rc=$($BB cat /tmp/.rxe-kvfix-rc 2>/dev/null || echo 125)
	say "command exited $rc"
	if command -v dmesg >/dev/null 2>&1; then
		dmesg >/results/dmesg.txt 2>&1 || $BB dmesg >/results/dmesg.txt
	else
		$BB dmesg >/results/dmesg.txt
	fi
	echo "$rc" >/results/exit-code.part && $BB mv /results/exit-code.part /results/exit-code
}

if [ "${1:-}" = --command ]; then
	# started by the runtime unit under systemd: the boot's other jobs first (bounded)
	state=$($BB timeout 1800 systemctl is-system-running --wait 2>&1)
	say "systemd: boot finished, system $state"
	run_command
	$BB sync
	# --force: no orderly stop of every unit (tens of seconds under TCG); systemd
	# still kills processes, unmounts and syncs before powering off
	systemctl --force poweroff || off
	exit 0
fi

say "init started"
opts=trans=virtio,version=9p2000.L,msize=512000
$BB mkdir -p /dev/pts /dev/shm
$BB mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
$BB mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
$BB mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
[ -e /dev/fd ] || $BB ln -s /proc/self/fd /dev/fd
[ -d /results ] || $BB mkdir -p /results || die "cannot create /results in the guest root"
$BB mount -t 9p -o "$opts,cache=none" rxeout /results || die "cannot mount the results share"
# the kernel booted far enough to run init: vm-run's boot-stall watch ends here (under
# systemd the command starts only after the boot's own jobs, which may take minutes)
$BB cut -d' ' -f1 /proc/uptime >/results/guest-booted
while read -r tag path mode; do
	[ -n "$tag" ] || continue
	$BB mkdir -p "$path" || die "cannot create $path for share $tag"
	$BB mount -t 9p -o "$opts,cache=loose,$mode" "$tag" "$path" || die "cannot mount share $tag at $path"
done <"$CTL/shares"
[ -s /etc/hostname ] && $BB hostname "$($BB cat /etc/hostname)"
$BB ip link set lo up

rel=$($BB uname -r)
dep=/lib/modules/$rel/modules.dep
# vm-run already ran depmod on the host if modules changed; depmod here is slow (TCG)
if [ ! -e "$dep" ]; then
	say "no modules.dep: running depmod -a (slow under emulation)"
	depmod -a "$rel" || say "depmod -a failed"
fi

if [ -e "$CTL/systemd" ]; then
	# runtime unit (/run is a tmpfs): wanted by multi-user.target, Type=exec so that
	# it does not hold up the boot it waits for
	$BB mkdir -p /run/systemd/system/multi-user.target.wants
	{
		echo '[Unit]'
		echo 'Description=rxe-kvfix VM test command (vmhost/vm-run --systemd)'
		echo 'After=basic.target'
		echo '[Service]'
		echo 'Type=exec'
		echo "ExecStart=$BB sh $CTL/guest-init.sh --command"
		echo 'StandardOutput=journal+console'
	} >/run/systemd/system/$UNIT
	$BB ln -sf ../$UNIT /run/systemd/system/multi-user.target.wants/$UNIT
	say "starting systemd as PID 1"
	exec /lib/systemd/systemd
fi

run_command
off
