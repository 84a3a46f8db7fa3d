#!/usr/bin/env bash
# ulp.sh: a kernel consumer of rxe: NVMe over RDMA, target (nvmet-rdma,
# configfs, a file-backed namespace on tmpfs) and host (nvme-rdma, nvme-cli) over one rxe
# device in this guest, on the stock module and then on rxe-kvfix.
#
#   ulp.sh KERNELRELEASE
#
# Per module: nvme connect over rdma; fio with crc32c verification, sequential and random
# writes read back and checked, block sizes 4 KiB, 64 KiB and the largest the ULP maps
# (max_hw_sectors_kb of the namespace); both modules must give the same verify result
# (no error); the rdma_core:mr_alloc trace events show the ULP's fast-registration MRs
# (ib_alloc_mr -> rxe_alloc_mr -> rxe_mr_init_fast) and how many pages each maps; dmesg
# is clean on rxe-kvfix. Results: OUT/ulp-PHASE-*.
set -uo pipefail

usage() { echo "Usage: ulp.sh KERNELRELEASE"; }
# shellcheck source=tests/vm/guest/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rxe_guest_main vm-ulp 1 1 "$@"
K=$1
NQN='rxe-kvfix-test'
CFS=/sys/kernel/config/nvmet
TR=/sys/kernel/tracing
BACKING=/run/rxe-kvfix-nvme.img

target_down() {
	nvme disconnect -n "$NQN" >/dev/null 2>&1 || true
	rm -f "$CFS/ports/1/subsystems/$NQN" 2>/dev/null
	rmdir "$CFS/ports/1" 2>/dev/null
	# (grouped: a redirection that fails reports before its own 2>/dev/null applies)
	{ echo 0 >"$CFS/subsystems/$NQN/namespaces/1/enable"; } 2>/dev/null
	rmdir "$CFS/subsystems/$NQN/namespaces/1" "$CFS/subsystems/$NQN" 2>/dev/null
	modprobe -r nvme-rdma nvmet-rdma 2>/dev/null
	true
}
cleanup() {
	target_down
	rm -f "$BACKING"
}
rxe_on_exit cleanup

[[ $(uname -r) == "$K" ]] || {
	t_fail "$K: booted kernel" "uname -r is $(uname -r)"
	exit 1
}
modprobe -a ib_core ib_uverbs udp_tunnel ip6_udp_tunnel dummy configfs || true
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
mountpoint -q "$TR" || mount -t tracefs none "$TR" 2>/dev/null
truncate -s 256M "$BACKING"
# fio's bytes per job: 16 MiB, 4096 I/Os at 4 KiB and 16 full-size fast-reg MRs at the
# largest block, each written, read back and checked (64 MiB took 8-30 s a job under
# TCG, 12 jobs, for the same paths); under KASAN (GUEST_KASAN, lib.sh) 4 MiB, since there
# the first 64 MiB job at 4 KiB had not ended after 5 min: every I/O
# crosses nvme-rdma, rxe and the fast-reg MR under KASAN's checks. 4 MiB is still
# 1024 I/Os at 4 KiB and 4 full-size MRs at the largest
FIO_SIZE=16M FIO_LIMIT=600
((GUEST_KASAN == 0)) || FIO_SIZE=4M FIO_LIMIT=1500

declare -A VERIFY=()
for PHASE in stock fixed; do
	dmesg -C
	load_phase "$K" "$PHASE" ulp || continue
	rxe_dummy_up rxe0 d0 10.77.0.1/24 "$BULK_MTU"
	# trace the verbs MR allocations of the kernel ULPs
	if [[ -d $TR/events/rdma_core/mr_alloc ]]; then
		echo >"$TR/trace"
		echo 1 >"$TR/events/rdma_core/mr_alloc/enable"
	fi

	t_start "$K ulp $PHASE: nvmet-rdma target on rxe0 and nvme-rdma host connected"
	modprobe -a nvmet nvmet-rdma nvme-rdma || {
		t_fail "modprobe nvmet nvmet-rdma nvme-rdma failed"
		continue
	}
	S=$CFS/subsystems/$NQN P=$CFS/ports/1
	if ! { mkdir -p "$S" && echo 1 >"$S/attr_allow_any_host" &&
		mkdir -p "$S/namespaces/1" && printf '%s' "$BACKING" >"$S/namespaces/1/device_path" &&
		echo 1 >"$S/namespaces/1/enable" &&
		mkdir -p "$P" && echo rdma >"$P/addr_trtype" && echo ipv4 >"$P/addr_adrfam" &&
		echo 10.77.0.1 >"$P/addr_traddr" && echo 4420 >"$P/addr_trsvcid" &&
		ln -s "$S" "$P/subsystems/$NQN"; }; then
		t_fail "configfs target setup failed"
		target_down
		continue
	fi
	before=$(cd /sys/block && printf '%s\n' nvme*n*)
	out=$(timeout 120 nvme connect -t rdma -a 10.77.0.1 -s 4420 -n "$NQN" 2>&1)
	dev=''
	# the namespace's block device: the one nvme*n* that was not there before (with
	# native multipath it is the subsystem's head, nvmeXnY, not the controller's path)
	for _ in {1..40}; do
		for b in /sys/block/nvme*n*; do
			n=${b##*/}
			[[ $n =~ ^nvme[0-9]+n[0-9]+$ ]] && ! grep -qx "$n" <<<"$before" && dev=/dev/$n
		done
		[[ -n $dev && -b $dev ]] && break
		sleep 0.5
	done
	if [[ -n $dev && -b $dev ]]; then
		t_pass
		echo "     $dev ($(cat "/sys/block/${dev#/dev/}/queue/max_hw_sectors_kb") KiB max per I/O; $out)"
	else
		t_fail "no namespace block device: $out"
		target_down
		rxe_dummy_down rxe0 d0
		rmmod rdma_rxe
		continue
	fi
	maxkb=$(cat "/sys/block/${dev#/dev/}/queue/max_hw_sectors_kb")
	res=''
	for rw in write randwrite; do
		for bs in 4k 64k "${maxkb}k"; do
			t_start "$K ulp $PHASE: fio $rw bs=$bs size=$FIO_SIZE, crc32c verify"
			log=$OUT/ulp-$PHASE-$rw-$bs.log
			rc=0
			timeout "$FIO_LIMIT" fio --name="ulp-$rw-$bs" --filename="$dev" --direct=1 --ioengine=libaio \
				--iodepth=8 --rw="$rw" --bs="$bs" --size="$FIO_SIZE" --verify=crc32c --verify_fatal=1 \
				--do_verify=1 --randrepeat=1 --output-format=normal >"$log" 2>&1 || rc=$?
			errs=$(grep -ciE 'verify: bad|crc32c: verify failed|err= *[1-9]' "$log")
			res+="$rw/$bs:rc=$rc,bad=$errs "
			if [[ $rc == 0 && $errs == 0 ]]; then
				t_pass
				echo "     $(grep -m1 -E '^ +(write|read):' "$log" | sed 's/^ *//')"
			else
				t_fail "fio exit $rc, $errs verify errors: $(grep -m2 -iE 'verify|error' "$log" | tr '\n' ' ' | cut -c1-200)"
			fi
		done
	done
	VERIFY[$PHASE]=$res

	t_start "$K ulp $PHASE: the ULP used fast-registration MRs (rdma_core:mr_alloc trace, rdma res)"
	rdma res show mr >"$OUT/ulp-$PHASE-rdma-res-mr.txt" 2>&1
	if [[ -f $TR/trace ]]; then
		echo 0 >"$TR/events/rdma_core/mr_alloc/enable" 2>/dev/null
		grep mr_alloc "$TR/trace" >"$OUT/ulp-$PHASE-mr_alloc.trace"
	fi
	nfr=$(grep -c 'mr_alloc' "$OUT/ulp-$PHASE-mr_alloc.trace" 2>/dev/null || true)
	nres=$(grep -c 'nvme' "$OUT/ulp-$PHASE-rdma-res-mr.txt" || true)
	if ((${nfr:-0} > 0 || ${nres:-0} > 0)); then
		t_pass
		echo "     $nfr mr_alloc events (first: $(head -n1 "$OUT/ulp-$PHASE-mr_alloc.trace" | sed 's/.*mr_alloc: //')); $nres MRs of nvme in rdma res"
	else
		t_fail "no mr_alloc trace event and no nvme MR in rdma res (see $OUT/ulp-$PHASE-*)"
	fi
	target_down
	rxe_dummy_down rxe0 d0
	unload_phase "$K" "$PHASE" ulp
done

t_start "$K ulp: stock and rxe-kvfix give the same fio verify results"
echo "     stock: ${VERIFY[stock]:-none}"
echo "     fixed: ${VERIFY[fixed]:-none}"
if [[ -n ${VERIFY[stock]:-} && ${VERIFY[stock]} == "${VERIFY[fixed]:-}" ]]; then t_pass; else t_fail "they differ"; fi
