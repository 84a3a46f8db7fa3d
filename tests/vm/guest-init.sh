#!/bin/sh
# rxe-kvfix guest init (PID 1 after switch_root), run by the static busybox that
# tests/vm/vm-run puts at /run/rxe-kvfix/bin/busybox. Not systemd: mounts the API file
# systems, the results and extra 9p shares, runs the command from cmd.sh, records its
# exit status, dmesg and powers off. Everything here must work with busybox alone.
# shellcheck disable=SC3040,SC3043
BB=/run/rxe-kvfix/bin/busybox
CTL=/run/rxe-kvfix/ctl
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb LANG=C.UTF-8
export RXE_KVFIX_RESULTS=/results RXE_KVFIX_GUEST_LIB=$CTL/guest-lib.sh

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

say "init started"
opts=trans=virtio,version=9p2000.L,msize=512000
$BB mkdir -p /dev/pts /dev/shm
$BB mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
$BB mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
$BB mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
[ -e /dev/fd ] || $BB ln -s /proc/self/fd /dev/fd
[ -d /results ] || $BB mkdir -p /results || die "cannot create /results in the guest root"
$BB mount -t 9p -o "$opts,cache=none" rxeout /results || die "cannot mount the results share"
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

$BB cut -d' ' -f1 /proc/uptime >/results/guest-started
say "kernel $rel up; running the command"
# The command's output goes to the console and /results/output.log. Background
# processes it leaves behind would keep the pipe open: once the command has exited
# and the pipe has not drained within 3 s, they get SIGTERM, then SIGKILL.
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
if $BB kill -0 "$pipe" 2>/dev/null; then
    say "command left processes behind: killing them"
    $BB kill -TERM -1 2>/dev/null
    $BB sleep 1
    $BB kill -KILL -1 2>/dev/null
fi
wait
rc=$($BB cat /tmp/.rxe-kvfix-rc 2>/dev/null || echo 125)
say "command exited $rc"
if command -v dmesg >/dev/null 2>&1; then
    dmesg >/results/dmesg.txt 2>&1 || $BB dmesg >/results/dmesg.txt
else
    $BB dmesg >/results/dmesg.txt
fi
echo "$rc" >/results/exit-code.part && $BB mv /results/exit-code.part /results/exit-code
off
