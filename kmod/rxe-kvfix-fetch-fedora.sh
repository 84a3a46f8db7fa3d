# shellcheck shell=bash
# rxe-kvfix-fetch-fedora.sh: the Fedora half of kmod/rxe-kvfix-fetch (--fedora),
# which sources it from beside itself and calls from_fedora; not executed. It uses
# the fetch's globals (VER CACHE TIMEOUT WORK AGAIN T1 BYTES ORIGIN) and helpers
# (fail say keep_tree).
#
# The kernel's source RPM kernel-N-V-R.src.rpm from the repositories dnf uses (dnf5
# download --srpm; dnf4: download --source), checked by dnf against the repository's
# metadata and by rpmkeys --checksig, kept as kernel-N-V-R.rxe.tar.xz: the top
# Makefile and the rxe directory of its linux-*.tar.*, with the rxe part of the
# distribution patch (patch-*.patch) applied. Never inside an RPM transaction
# (kmod/rxe-kvfix-kernel-hook starts it from rxe-kvfix-fetch@.service after it).

# from_fedora: keep the rxe part of kernel-VER.src.rpm (VER: its N-V-R)
from_fedora() {
	local d=$WORK/dnf rc=0 dnf args srpm sig
	local remedy="on a host that reaches the repository run dnf download --srpm kernel-$VER (dnf4: --source) and put it in $CACHE/, $AGAIN"
	if command -v dnf5 >/dev/null; then
		dnf=dnf5 args=(download --srpm)
	elif command -v dnf >/dev/null; then
		dnf=dnf args=(download --source)
	else
		fail "dnf is not installed" "$remedy"
	fi
	mkdir -p "$d"
	say "$dnf ${args[*]} kernel-$VER"
	timeout -k 10 "$TIMEOUT" "$dnf" "${args[@]}" --destdir "$d" "kernel-$VER" >"$WORK/dnf.log" 2>&1 || rc=$?
	srpm=$(find "$d" -maxdepth 1 -name 'kernel-*.src.rpm' -print -quit)
	# A repository dnf cannot read (a third party's without metadata, one that
	# does not answer) stops the whole command where it is not marked
	# skip_if_unavailable (Fedora's own repositories say False): then once more
	# with every repository that cannot be read skipped (--setopt, a repository
	# glob, dnf5 and dnf4 alike), so that one serving the source RPM still serves
	# it; the first run's line names what could not be read.
	local unread=''
	if [[ -z $srpm ]] && ((rc != 124 && rc != 137)) &&
		unread=$(grep -m1 'Failed to download metadata' "$WORK/dnf.log" | sed -E 's#[a-z]+://[^ ]*/##g' | cut -c1-200); then
		cat "$WORK/dnf.log" >&2
		say "$dnf could not read a repository ($unread): again, skipping those it cannot read"
		rc=0
		timeout -k 10 "$TIMEOUT" "$dnf" "${args[@]}" --setopt='*.skip_if_unavailable=True' --destdir "$d" "kernel-$VER" >"$WORK/dnf.log" 2>&1 || rc=$?
		srpm=$(find "$d" -maxdepth 1 -name 'kernel-*.src.rpm' -print -quit)
	fi
	if ((rc != 0)) || [[ -z $srpm ]]; then
		cat "$WORK/dnf.log" >&2
		((rc != 124 && rc != 137)) || fail "$dnf download of kernel-$VER did not finish in $TIMEOUT s (fetch_timeout)" "$remedy"
		local err
		# dnf's last words (it may print none: the exit status then)
		err=$(grep -vE '^[[:space:]]*$' "$WORK/dnf.log" | tail -n1 | sed -E 's#[a-z]+://[^ ]*/##g' | cut -c1-200 || true)
		# (dnf5 exits 0 having downloaded nothing when the package's source
		# repository is gone)
		((rc != 0)) || err="it exited 0 but downloaded no source RPM: no reachable repository serves it"
		[[ -z $unread ]] || err+="; it could not read: $unread"
		fail "$dnf ${args[*]} kernel-$VER failed (${err:-exit $rc, no message})" "$remedy"
	fi
	[[ -z $unread ]] || say "ignored the repositories $dnf could not read: kernel-$VER came from one it read"
	# shellcheck disable=SC2034  # T1: read by stats (kmod/rxe-kvfix-fetch)
	T1=$(date +%s.%N) BYTES=$(stat -c %s "$srpm")
	# dnf checked the file against the repository's metadata; rpm's own digests
	# and, where the key is imported, its signature
	if ! sig=$(rpmkeys --checksig "$srpm" 2>&1) || [[ $sig == *"NOT OK"* ]]; then
		fail "$(basename "$srpm") fails rpmkeys --checksig (${sig##*: })" "$remedy"
	fi
	local x=$WORK/srpm-x err
	err=$(rxe_kvfix_srpm_unpack "$srpm" "$x") || fail "cannot unpack $(basename "$srpm") ($err)" "$remedy"
	local tb top p n=0
	tb=$(find "$x" -maxdepth 1 -name 'linux-*.tar.*' -print -quit)
	[[ -n $tb ]] || fail "$(basename "$srpm") holds no linux-*.tar.*" "report it"
	rc=0
	top=$(rxe_kvfix_extract_rxe "$tb" "$x/t") || rc=$?
	((rc != 1)) || fail "cannot unpack $(basename "$tb") (${top%%$'\t'*})" "$remedy"
	((rc == 0)) || fail "$(basename "$tb") has no $DRIVER_DIR/rxe_mr.c" "report it"
	if ! p=$(rxe_kvfix_srpm_rxe_patches "$x" "$top" 1); then
		fail "the rxe part of ${p##*$'\n'} does not apply to $(basename "$tb")" "report it"
	fi
	[[ -z $p ]] || n=$(wc -l <<<"$p")
	# shellcheck disable=SC2034  # read by stats (kmod/rxe-kvfix-fetch)
	ORIGIN=dnf
	keep_tree "$top" "kernel-$VER.rxe.tar.xz" "package=kernel (source RPM)
file=$(basename "$srpm")
sha256=$(sha256sum "$srpm" | cut -d' ' -f1)
bytes=$BYTES
verified=$dnf (the repository metadata's checksum); rpmkeys --checksig: ${sig##*: }
distribution=$n patch file(s) with an rxe part applied"
}
