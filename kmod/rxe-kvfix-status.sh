# shellcheck shell=bash
# rxe-kvfix-status.sh: `rxe-kvfix status` (sourced by kmod/rxe-kvfix). One row per
# installed kernel, from what the host already holds (nothing is extracted or built):
#   the kernel's record (kmod/rxe-kvfix-record.sh: state, time, message, and class,
#     provider and source as kmod/rxe-kvfix-prepare found them),
#   DKMS's kept log of the build (rxe-kvfix-source.txt, kmod/rxe-kvfix-postbuild),
#   modinfo -k RELEASE (what rdma_rxe resolves to for that kernel),
#   the cache's .provenance files (what the fetch kept for it, verified by what, and
#     the archive that served it: repository, or the distribution's archive of record).
#   Secure Boot (sb_check, once per call): is it on, and is the certificate DKMS signs
#     with enrolled (mokutil --sb-state, mokutil --test-key).
# The verdict of a row: fixed (rdma_rxe resolves to rxe-kvfix's, and Secure Boot does
# not refuse it), not-needed (its source is fixed or unaffected), not-fixed (anything
# else, a module Secure Boot refuses included: exit 1).

# sb_dkms_cert: the certificate DKMS signs modules with: the last mok_certificate= of
# DKMS's framework.conf, then framework.conf.d/*.conf (the order dkms 3.x reads them
# in), else DKMS's default /var/lib/dkms/mok.pub. Ubuntu's dkms package sets it to
# /var/lib/shim-signed/mok/MOK.der there; Debian's and Fedora's leave the default.
# RXE_KVFIX_DKMS_CONF_DIR: another directory than /etc/dkms (tests).
sb_dkms_cert() {
	local dir=${RXE_KVFIX_DKMS_CONF_DIR:-/etc/dkms} f v cert=/var/lib/dkms/mok.pub
	for f in "$dir/framework.conf" "$dir"/framework.conf.d/*.conf; do
		[[ -r $f ]] || continue
		v=$(sed -n 's/^[[:space:]]*mok_certificate=[[:space:]]*//p' "$f" | tail -n1)
		v=${v%%[[:space:]]#*}
		v=${v//\"/}
		v=${v//\'/}
		[[ -z $v ]] || cert=$v
	done
	printf '%s\n' "$cert"
}

# sb_check: set SB_ENABLED (true, false or unknown), SB_CERT, SB_KEY (enrolled,
# not-enrolled, pending (queued for MokManager's next boot), missing (no such file),
# unknown), SB_ENROL (the distribution's command) and SB_REFUSES (true when the kernel
# refuses a module signed with SB_CERT now). mokutil's words, as its source prints
# them: --sb-state "SecureBoot enabled" / "SecureBoot disabled", and "SecureBoot
# validation is disabled in shim" (shim lets unsigned code through: nothing refused);
# --test-key prints "FILE is not enrolled", "FILE is already enrolled", "... in db" or
# "... in the enrollment request" (pending), and exits -1 (255) with neither when it
# cannot read the file or it is no X.509 certificate. Its exit status is no verdict:
# releases up to 0.7.2 (Debian's, the VM scenario's) exit 0 on "not enrolled" and 1 on
# "already enrolled", mokutil's development branch since 2025 the other way round. So
# the words decide, whatever the status but the error's. Without mokutil, the
# firmware's SecureBoot variable says whether Secure Boot is on; the key stays unknown.
SB_EFIVAR=/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c
sb_check() {
	local out b
	SB_ENABLED=unknown SB_KEY=unknown SB_REFUSES=false
	SB_CERT=$(sb_dkms_cert)
	if rxe_kvfix_ubuntu_like && [[ $SB_CERT == */shim-signed/mok/MOK.der ]]; then
		SB_ENROL="update-secureboot-policy --enroll-key"
	else
		SB_ENROL="mokutil --import $SB_CERT"
	fi
	SB_ENROL+=", then reboot and in MokManager: Enroll MOK, Continue, Yes, the password"
	if command -v mokutil >/dev/null; then
		out=$(mokutil --sb-state 2>&1 || true)
		case $out in
		*"validation is disabled in shim"*) SB_ENABLED=false ;;
		*"SecureBoot enabled"*) SB_ENABLED=true ;;
		*"SecureBoot disabled"* | *"not supported on this system"* | *"doesn't support Secure Boot"*) SB_ENABLED=false ;;
		esac
	elif [[ ! -d /sys/firmware/efi ]]; then
		SB_ENABLED=false # booted without UEFI
	elif b=$(od -An -tu1 "$SB_EFIVAR" 2>/dev/null); then
		b=${b//[[:space:]]/ }
		case ${b##* } in 1) SB_ENABLED=true ;; 0) SB_ENABLED=false ;; esac
	fi
	[[ $SB_ENABLED == true ]] || return 0
	if [[ ! -f $SB_CERT ]]; then
		SB_KEY=missing
	elif command -v mokutil >/dev/null; then
		out=$(mokutil --test-key "$SB_CERT" 2>&1) && b=0 || b=$?
		if ((b == 0 || b == 1)); then
			case $out in
			*"is not enrolled"*) SB_KEY=not-enrolled ;;
			*"in the enrollment request"*) SB_KEY=pending ;;
			*"is already enrolled"* | *"is already in db"*) SB_KEY=enrolled ;;
			esac
		fi
	fi
	case $SB_KEY in
	not-enrolled) SB_REFUSES=true ;;
	pending)
		SB_REFUSES=true
		SB_ENROL="reboot and in MokManager: Enroll MOK, Continue, Yes, the password given to mokutil --import"
		;;
	esac
}

# sb_words: the one line of what Secure Boot does to rxe-kvfix's module, and what to do
sb_words() {
	if [[ $SB_KEY == pending ]]; then
		printf 'Secure Boot is on and %s, the key rxe-kvfix'"'"'s module is signed with, is queued for enrolment but not enrolled yet: the kernel refuses the module (modprobe rdma_rxe loads nothing) until you %s\n' "$SB_CERT" "$SB_ENROL"
	else
		printf 'Secure Boot is on and %s, the key rxe-kvfix'"'"'s module is signed with, is not enrolled: the kernel refuses the module (modprobe rdma_rxe loads nothing). Enrol it: %s\n' "$SB_CERT" "$SB_ENROL"
	fi
}

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
	R_REFUSED=false
	if [[ $R_MODULE == rxe-kvfix && $SB_REFUSES == true ]]; then
		R_VERDICT=not-fixed R_REFUSED=true
	elif [[ $R_MODULE == rxe-kvfix ]]; then
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
	rxe-kvfix) if [[ $R_REFUSED == true ]]; then mod="rxe-kvfix REFUSED"; else mod="rxe-kvfix ${R_MODVER%-rxe-kvfix}"; fi ;;
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
	sb_check
	if ((json)); then
		printf '{"tool":{"name":"rxe-kvfix","version":%s},"schema_version":1,"running":%s,' \
			"$(json_str "$VERSION")" "$(json_str "$(uname -r)")"
		printf '"secure_boot":{"enabled":%s,"certificate":%s,"key":"%s","refuses_module":%s,"enrol":%s,"message":%s},"kernels":[' \
			"$([[ $SB_ENABLED == unknown ]] && echo null || echo "$SB_ENABLED")" "$(json_str "$SB_CERT")" "$SB_KEY" \
			"$SB_REFUSES" "$(json_str "$([[ $SB_REFUSES == false ]] || echo "$SB_ENROL")")" \
			"$(json_str "$([[ $SB_REFUSES == false ]] || sb_words)")"
	else
		printf '%-26s %-22s %-18s %-34s %s\n' KERNEL SOURCE RDMA_RXE FROM LAST
	fi
	local notes=() refused=0
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
			[[ $R_REFUSED == false ]] || refused=1
			[[ $R_VERDICT != not-fixed || -z $R_MESSAGE || $R_REFUSED == true ]] || notes+=("$R_KERNEL: $R_MESSAGE")
		fi
	done
	if ((json)); then
		printf ']}\n'
	else
		((n)) || echo "(no kernel installed: /lib/modules/*/kernel)"
		for k in "${notes[@]}"; do printf '  %s\n' "$k"; done
		((!refused)) || printf '  REFUSED: %s\n' "$(sb_words)"
		echo "(* the running kernel; rxe-kvfix $VERSION; records in $(rxe_kvfix_state_dir)/status)"
	fi
	return "$rc"
}
