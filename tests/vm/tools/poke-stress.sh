#!/bin/sh
# toggle a static key (sched_schedstats: jump labels in the scheduler's hot paths) N
# times while the other vCPU context-switches (fork/exit loop): live text patching
# with int3 under load
n=${1:-200}
(while :; do /bin/true; done) &
bg=$!
i=0
while [ $i -lt "$n" ]; do
	echo 1 >/proc/sys/kernel/sched_schedstats
	echo 0 >/proc/sys/kernel/sched_schedstats
	i=$((i + 1))
done
kill $bg
echo "toggled sched_schedstats $n times"
