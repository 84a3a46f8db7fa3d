#!/bin/sh
# CPU-heavy guest job: one shell arithmetic loop of N iterations per vCPU, timed
n=${1:-200000}
t0=$(cut -d' ' -f1 /proc/uptime)
for _ in $(seq "$(nproc)"); do
	(
		i=0
		while [ $i -lt "$n" ]; do i=$((i + 1)); done
	) &
done
wait
t1=$(cut -d' ' -f1 /proc/uptime)
echo "cpu-job: $(nproc) x $n iterations in $(echo "$t1 $t0" | awk '{ printf "%.2f", $1 - $2 }') s guest time"
