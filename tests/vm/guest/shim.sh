# shellcheck shell=bash
# shim.sh: the fault table's rows on real rxe (issue 62 item 5), sourced by nonroot.sh
# and run in its fixed phase (rxe-kvfix loaded, rxe0 up): rxe-verify under the
# LD_PRELOAD shim tests/vm/shim/rxv_shim.c (built on the host by the nonroot scenario,
# /usr/local/lib/rxv-shim.so), one fault a run. Each row must FAIL with its cause in
# the --json report (the host validates every report against the schema after the
# boot) and the shim must say it injected the fault; the shim with no fault must PASS,
# so a shim that breaks every run cannot pass as "caught". The rows and why the others
# are not here: tests/vm/shim/README.md.

SHIM_SO=/usr/local/lib/rxv-shim.so
SHIM_SIZE=4M
SHIM_MSG=1M

# shim_run NAME FAULT OP MODE [ARGS...]: rxe-verify run under the shim, the report in
# $OUT/shim-NAME.json, stderr in .err; sets SHIM_RC and SHIM_SECS
shim_run() {
	local name=$1 fault=$2 op=$3 mode=$4 t0=$SECONDS
	shift 4
	SHIM_RC=0
	LD_PRELOAD=$SHIM_SO RXV_SHIM_FAULT=$fault RXV_SHIM_OP=$op \
		timeout 300 "$RV" run -d rxe0 -s "$SHIM_SIZE" --mode "$mode" --msg-size "$SHIM_MSG" --json "$@" \
		>"$OUT/shim-$name.json" 2>"$OUT/shim-$name.err" || SHIM_RC=$?
	SHIM_SECS=$((SECONDS - t0))
}

# shim_rows K: the baseline and every row
shim_rows() {
	local k=$1 mode op fault cause name extra got t_all=$SECONDS
	if [[ ! -r $SHIM_SO ]]; then
		t_skip "$k shim: fault rows on real rxe" "no $SHIM_SO in this root (the nonroot scenario builds it on the host)"
		return 0
	fi
	for mode in sampled full; do
		name=none-$mode
		t_start "$k shim: no fault, $SHIM_SIZE $mode through the shim's wrappers: PASS"
		shim_run "$name" none write "$mode"
		if [[ $SHIM_RC == 0 && $(jget "$OUT/shim-$name.json" 'j["verdict"] == "pass" and r["verified_bytes"] > 0') == true ]] &&
			grep -q '^rxv-shim: post_send and poll_cq of rxe0 wrapped, fault none' "$OUT/shim-$name.err"; then
			t_pass
		else
			t_fail "exit $SHIM_RC: $(head -c 300 "$OUT/shim-$name.err")"
		fi
	done
	# FAULT CAUSE MODES OPS [rxe-verify args]
	while read -r fault cause modes ops extra; do
		for mode in ${modes//,/ }; do
			for op in ${ops//,/ }; do
				# full mode: a READ's overrun lands in the next chunk, which overwrites it
				# (userspace/README.md "Fault table": not caught by design)
				[[ $fault/$mode/$op != overrun/full/read ]] || continue
				name=$fault-$mode-$op
				t_start "$k shim: $fault, $mode, ${op^^}: FAIL with cause $cause"
				# shellcheck disable=SC2086  # extra holds words
				shim_run "$name" "$fault" "$op" "$mode" $extra
				# one python3 a row (its start is most of a row's seconds under TCG)
				got=$(jget "$OUT/shim-$name.json" '(r.get("diagnosis") or {}).get("cause") if r["result"] == "fail" and j["verdict"] == "fail" else "result " + r["result"]')
				if [[ $SHIM_RC == 1 && $got == "$cause" ]] &&
					grep -q "^rxv-shim: injected $fault into ${op^^}" "$OUT/shim-$name.err"; then
					t_pass
				else
					t_fail "exit $SHIM_RC, cause '$got' ($SHIM_SECS s): $(grep -m2 -E 'rxv-shim|error|mismatch' "$OUT/shim-$name.err" | tr '\n' ' ' | cut -c1-300)"
				fi
			done
		done
	done <<'ROWS'
truncate data_corruption sampled,full write,read
shift data_corruption sampled,full write,read
nodata data_corruption sampled,full write,read
corrupt data_corruption sampled,full write,read
overrun data_corruption sampled,full write,read
drop transfer_error sampled write,read --timeout 1
delay transfer_error sampled write,read --timeout 1
ROWS
	echo "     shim rows: $((SECONDS - t_all)) s in all"
}
