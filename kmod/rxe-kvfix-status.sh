# shellcheck shell=bash
# rxe-kvfix-status.sh: `rxe-kvfix status` (sourced by kmod/rxe-kvfix). One row per
# installed kernel, from what the host already holds (nothing is extracted or built):
#   the kernel's record (kmod/rxe-kvfix-record.sh: state, time, message, and class,
#     provider and source as kmod/rxe-kvfix-prepare found them),
#   DKMS's kept log of the build (rxe-kvfix-source.txt, kmod/rxe-kvfix-postbuild),
#   modinfo -k RELEASE (what rdma_rxe resolves to for that kernel),
#   the cache's .provenance files (what the fetch kept for it, verified by what, and
#     the archive that served it: repository, or the distribution's archive of record).
# The verdict of a row: fixed (rdma_rxe resolves to rxe-kvfix's), not-needed (its
# source is fixed or unaffected), not-fixed (anything else: exit 1).

# row RELEASE: set the R_* fields of one kernel
row() {
	local k=$1 log p
	rxe_kvfix_kernel "$k"
	R_KERNEL=$k R_RUNNING=false
	[[ $k != "$(uname -r)" ]] || R_RUNNING=true
	R_STATE=$(rxe_kvfix_recorded "$k" state) R_TIME=$(rxe_kvfix_recorded "$k" time)
	R_RECVER=$(rxe_kvfix_recorded "$k" version) R_MESSAGE=$(rxe_kvfix_recorded "$k" message)
	R_CLASS=$(rxe_kvfix_recorded "$k" class) R_PROVIDER=$(rxe_kvfix_recorded "$k" provider)
	R_DESC=$(rxe_kvfix_recorded "$k" source)
	# a build recorded before the record had these: DKMS's kept provenance
	log=$(find /var/lib/dkms/rxe-kvfix/*/"$k"/*/log -name rxe-kvfix-source.txt 2>/dev/null | head -n1 || true)
	if [[ -n $log && -z $R_CLASS ]]; then
		R_CLASS=$(sed -n 's/.* class=\([^ ]*\) .*/\1/p' "$log")
		R_PROVIDER=$(sed -n 's/.* provider=\([^ ]*\) .*/\1/p' "$log")
		R_DESC=$(sed -n 's/.* source=//p' "$log")
	fi
	R_MODVER=$(modinfo -k "$k" -F version rdma_rxe 2>/dev/null | head -n1 || true)
	R_MODPATH=$(modinfo -k "$k" -n rdma_rxe 2>/dev/null | head -n1 || true)
	if [[ $R_MODVER == *-rxe-kvfix ]]; then
		R_MODULE=rxe-kvfix
	elif [[ -n $R_MODPATH ]]; then
		R_MODULE=in-tree
	else
		R_MODULE=none
	fi
	# the source the fetch kept for it (its .provenance names the kernel or its version)
	R_KEPT='' R_KEPT_BYTES='' R_VERIFIED='' R_ARCHIVE=''
	for p in "$CACHE_DIR"/*.provenance; do
		[[ -f $p && -f ${p%.provenance} ]] || continue
		if grep -qx "kernel=$k" "$p" || { [[ -n $KERNEL_PKGVER ]] && grep -qxF "version=$KERNEL_PKGVER" "$p"; }; then
			R_KEPT=${p%.provenance}
			R_KEPT_BYTES=$(stat -c %s "$R_KEPT")
			R_VERIFIED=$(sed -n 's/^verified=//p' "$p" | head -n1)
			R_ARCHIVE=$(sed -n 's/^archive=//p' "$p" | head -n1)
			break
		fi
	done
	if [[ $R_MODULE == rxe-kvfix ]]; then
		R_VERDICT=fixed
	elif [[ $R_STATE == not-needed || $R_CLASS == fixed || $R_CLASS == unaffected ]]; then
		R_VERDICT=not-needed
	else
		R_VERDICT=not-fixed
	fi
}

# words for people
class_words() {
	case $1 in
	affected-*) printf 'affected (%s)\n' "${1#affected-}" ;;
	fixed) echo fixed ;;
	unaffected) echo 'not affected' ;;
	*) echo unknown ;;
	esac
}
human_bytes() { awk -v b="$1" 'BEGIN { if (b >= 1048576) printf "%.1f MB", b / 1048576; else printf "%d KB", (b + 1023) / 1024 }'; }

row_text() {
	local mod from last
	case $R_MODULE in
	rxe-kvfix) mod="rxe-kvfix ${R_MODVER%-rxe-kvfix}" ;;
	*) mod=$R_MODULE ;;
	esac
	from=${R_PROVIDER:--}
	[[ -z $R_KEPT ]] || from+=", kept $(human_bytes "$R_KEPT_BYTES")${R_ARCHIVE:+ from $R_ARCHIVE}${R_VERIFIED:+, verified by ${R_VERIFIED%% (*}}"
	last=${R_STATE:-never tried}${R_TIME:+ $R_TIME}
	printf '%-26s %-22s %-18s %-34s %s\n' "$R_KERNEL$([[ $R_RUNNING == true ]] && echo ' *')" \
		"$(class_words "$R_CLASS")" "$mod" "$from" "$last"
}

# json_str STRING: STRING as a JSON string (null when empty)
json_str() {
	local s=$1
	[[ -n $s ]] || {
		printf 'null'
		return
	}
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\t'/\\t}
	s=${s//$'\r'/\\r}
	s=${s//$'\n'/\\n}
	s=$(tr -d '\000-\010\013\014\016-\037' <<<"$s")
	printf '"%s"' "$s"
}
json_num() { if [[ -n $1 ]]; then printf '%s' "$1"; else printf 'null'; fi; }

row_json() {
	printf '{"kernel":%s,"running":%s,"verdict":"%s",' "$(json_str "$R_KERNEL")" "$R_RUNNING" "$R_VERDICT"
	printf '"source":{"class":%s,"provider":%s,"description":%s,"kept":%s,"kept_bytes":%s,"verified":%s,"archive":%s},' \
		"$(json_str "$R_CLASS")" "$(json_str "$R_PROVIDER")" "$(json_str "$R_DESC")" "$(json_str "$R_KEPT")" \
		"$(json_num "$R_KEPT_BYTES")" "$(json_str "$R_VERIFIED")" "$(json_str "$R_ARCHIVE")"
	printf '"module":{"resolves_to":"%s","version":%s,"path":%s},' "$R_MODULE" "$(json_str "$R_MODVER")" \
		"$(json_str "$R_MODPATH")"
	printf '"last":{"state":%s,"time":%s,"version":%s,"message":%s}}' "$(json_str "$R_STATE")" \
		"$(json_str "$R_TIME")" "$(json_str "$R_RECVER")" "$(json_str "$R_MESSAGE")"
}

cmd_status() {
	local json=0 k kernels=() rc=$EX_OK n=0 sep=''
	while (($#)); do
		case $1 in
		--json) json=1 ;;
		-h | --help)
			usage
			return 0
			;;
		-*) usage_error "status: unknown option '$1'" ;;
		*)
			check_release "$1"
			[[ -d /lib/modules/$1 ]] || usage_error "status: kernel $1 is not installed (no /lib/modules/$1; ls /lib/modules)"
			kernels+=("$1")
			;;
		esac
		shift
	done
	((${#kernels[@]})) || mapfile -t kernels < <(rxe_kvfix_installed_kernels)
	if ((json)); then
		printf '{"tool":{"name":"rxe-kvfix","version":%s},"schema_version":1,"running":%s,"kernels":[' \
			"$(json_str "$VERSION")" "$(json_str "$(uname -r)")"
	else
		printf '%-26s %-22s %-18s %-34s %s\n' KERNEL SOURCE RDMA_RXE FROM LAST
	fi
	local notes=()
	for k in "${kernels[@]}"; do
		row "$k"
		n=$((n + 1))
		[[ $R_VERDICT != not-fixed ]] || rc=$EX_FAIL
		if ((json)); then
			printf '%s' "$sep"
			row_json
			sep=,
		else
			row_text
			[[ $R_VERDICT != not-fixed || -z $R_MESSAGE ]] || notes+=("$R_KERNEL: $R_MESSAGE")
		fi
	done
	if ((json)); then
		printf ']}\n'
	else
		((n)) || echo "(no kernel installed: /lib/modules/*/kernel)"
		for k in "${notes[@]}"; do printf '  %s\n' "$k"; done
		echo "(* the running kernel; rxe-kvfix $VERSION; records in $(rxe_kvfix_state_dir)/status)"
	fi
	return "$rc"
}
