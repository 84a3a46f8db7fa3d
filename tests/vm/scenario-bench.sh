# shellcheck shell=bash
# tests/vm/scenario-bench.sh: sourced by tests/vm/scenarios; defines
#
#   scenario_bench KERNEL
#
# One boot of KERNEL (the prepared overlay at $MNT, rxe-kvfix installed by DKMS)
# running tests/vm/guest/bench.sh: registration time, RDMA bandwidth (rxe-verify
# against perftest) and kernel memory per registered GiB, stock rdma_rxe and
# rxe-kvfix side by side. The host's load before and after the boot is recorded
# beside the guest's; tests/bench/render collects everything into
# $OUT/bench-KERNEL/results.json and renders RESULTS.md (printed here).
#
# Environment:
#   RXE_BENCH_FORM=short|full  short (default, CI): 3 repetitions, 64 MiB..1 GiB,
#                              64 KiB and 1 MiB messages, 7G guest; full: 5
#                              repetitions, up to 8 GiB, 1 GiB messages, 11G guest
#   RXE_BENCH_MEM=SIZE         guest memory instead of 7G / 11G
#   RXE_BENCH_REPS_1G=N        full form: runs with 1 GiB messages (default 3)
#   RXE_BENCH_PERFTEST_1G=0|1  full form: perftest at 1 GiB too (default 1; each
#                              process fills a 2 GiB buffer with rand() first)
#   RXE_BENCH_TIMEOUT=SECS     VM timeout (default 1800 short, 7200 full); the
#                              outputs of the steps that finished are still rendered
#   RXE_BENCH_PUBLISH=DIR      also copy results.json and RESULTS.md there
#                              (make bench: tests/bench)
# Uses from tests/vm/scenarios: boot, OUT, REPO, t_* (tests/testlib.sh).

scenario_bench() {
	local k=$1 form=${RXE_BENCH_FORM:-short} mem tmo name dir host_env out
	case $form in
	short) mem=${RXE_BENCH_MEM:-7G} tmo=1800 ;;
	full) mem=${RXE_BENCH_MEM:-11G} tmo=7200 ;;
	*) t_fail "bench: form" "RXE_BENCH_FORM must be short or full, not '$form'"; return 0 ;;
	esac
	name=bench-$k
	dir=$OUT/$name
	host_env=$OUT/$name.host-env.txt
	{
		echo "host_loadavg_start=$(cat /proc/loadavg)"
		echo "host_nproc=$(nproc)"
		echo "host_memtotal_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)"
		echo "host_memavailable_kib_start=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)"
		echo "host_cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
		echo "host_qemu=$(qemu-system-x86_64 --version 2>/dev/null | head -n1)"
		echo "host_date_start=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
		echo "guest_mem=$mem"
		echo "form=$form"
		echo "commit=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$REPO" diff --quiet HEAD -- tests/vm/guest/bench.sh userspace 2>/dev/null || echo '+dirty')"
	} >"$host_env"
	# VM timeout: the full form can take longer than boot's 40 min default on a loaded host
	tmo=${RXE_BENCH_TIMEOUT:-$tmo}
	BOOT_MEM=$mem BOOT_ARGS="${BOOT_ARGS:-} --timeout $tmo" boot "$name" "$k" /root/rxe-kvfix/tests/vm/guest/bench.sh \
		"$k" "$form" "${RXE_BENCH_REPS_1G:-3}" "${RXE_BENCH_PERFTEST_1G:-1}"
	{
		echo "host_loadavg_end=$(cat /proc/loadavg)"
		echo "host_date_end=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	} >>"$host_env"
	[[ ! -d $dir ]] || cp "$host_env" "$dir/bench-host.txt"

	t_start "bench $k: results collected and rendered ($form form)"
	if out=$(python3 "$REPO/tests/bench/render" collect "$dir" -o "$dir/results.json" 2>&1) &&
		out=$(python3 "$REPO/tests/bench/render" table "$dir/results.json" -o "$dir/RESULTS.md" 2>&1); then
		t_pass
		cat "$dir/RESULTS.md"
		if [[ -n ${RXE_BENCH_PUBLISH:-} ]]; then
			cp "$dir/results.json" "$dir/RESULTS.md" "$RXE_BENCH_PUBLISH/"
			echo "--- bench: results.json and RESULTS.md copied to $RXE_BENCH_PUBLISH"
		fi
	else
		t_fail "$(tail -n3 <<<"$out" | tr '\n' ' ')"
	fi
}
