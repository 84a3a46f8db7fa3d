# shellcheck shell=bash
# rxe-kvfix-fetch-fedora.sh: the Fedora half of kmod/rxe-kvfix-fetch (--fedora),
# which sources it from beside itself and calls from_fedora; not executed. It uses
# the fetch's globals (VER CACHE TIMEOUT ARCHIVE WORK AGAIN T1 BYTES ORIGIN) and
# helpers (fail say keep_tree).
# shellcheck disable=SC2153 # ARCHIVE: set by kmod/rxe-kvfix-fetch
#
# The kernel's source RPM kernel-N-V-R.src.rpm from the repositories dnf uses (dnf5
# download --srpm; dnf4: download --source), checked by dnf against the repository's
# metadata and by rpmkeys --checksig; when no repository serves it (an older
# installed kernel: Fedora's updates repository indexes the newest build only;
# excludepkgs=kernel* in dnf.conf) and archive=auto, from the archive of record,
# Koji's package layout (from_koji), accepted only with a signature by a key rpm
# trusts. Kept as kernel-N-V-R.rxe.tar.xz: the top
# Makefile and the rxe directory of its linux-*.tar.*, with the rxe part of the
# distribution patch (patch-*.patch) applied. Never inside an RPM transaction
# (kmod/rxe-kvfix-kernel-hook starts it from rxe-kvfix-fetch@.service after it).

# koji_topurl: the topurl of the koji profile in the machine's koji configuration,
# read as koji reads it (/etc/koji.conf.d/*.conf, then /etc/koji.conf: a later file
# wins); empty when none says one
koji_topurl() {
	local f line sec='' url=''
	for f in /etc/koji.conf.d/*.conf /etc/koji.conf; do
		[[ -r $f ]] || continue
		while IFS= read -r line || [[ -n $line ]]; do
			if [[ $line =~ ^[[:space:]]*\[([^]]+)\] ]]; then
				sec=${BASH_REMATCH[1]}
			elif [[ $sec == koji && $line =~ ^[[:space:]]*topurl[[:space:]]*[=:][[:space:]]*([^[:space:]]+) ]]; then
				url=${BASH_REMATCH[1]}
			fi
		done <"$f"
	done
	printf '%s\n' "${url%/}"
}

# fedora_remedy: what to do when no archive served kernel-VER.src.rpm, one that can
# succeed: dnf with the exclusion lifted when dnf.conf excludes kernel packages,
# else Koji's client (whose profile knows where Koji is); a kernel whose name
# carries no release (not built by Fedora) only has the repositories
fedora_remedy() {
	local r="run koji download-build --arch=src kernel-$VER (dnf install koji)" x=''
	[[ $VER == *-* ]] || r="on a host that reaches the repository run dnf download --srpm kernel-$VER (dnf4: --source)"
	if grep -sqE '^[[:space:]]*exclude(pkgs)?[[:space:]]*=.*kernel' /etc/dnf/dnf.conf; then
		x="run dnf download --srpm --disableexcludes=main kernel-$VER (dnf.conf excludes kernel packages)"
		[[ $VER != *-* ]] || x+=" or ${r#run }"
		r=$x
	fi
	printf '%s and put the .src.rpm in %s/, %s\n' "$r" "$CACHE" "$AGAIN"
}

# No download storm: a kernel whose source no archive served is not tried again (by
# the boot repair, the fetch unit or a package script) until something it depends on
# changed or a day went by. FAILED/kernel-VER holds the time of the failure, its line
# and the state it was made in (fedora_state: the settings of rxe-kvfix, dnf and
# koji, the keys rpm trusts, dnf's cached repository metadata (repomd.xml, refreshed by dnf's own
# makecache timer or any dnf run), what is in the cache); a different state, or 24
# hours since, is tried again.
FAILED_BACKOFF=86400
fedora_state() {
	{
		printf 'archive=%s\n' "$ARCHIVE"
		cat /etc/rxe-kvfix/rxe-kvfix.conf /etc/dnf/dnf.conf /etc/yum.repos.d/*.repo /etc/koji.conf /etc/koji.conf.d/*.conf 2>/dev/null
		rpm -q gpg-pubkey 2>/dev/null
		find /var/cache/libdnf5 /var/cache/dnf -path '*/repodata/repomd.xml' -printf '%p %s %T@\n' 2>/dev/null | sort
		find "$CACHE" -maxdepth 1 -type f ! -name '.*' -printf '%f %s %T@\n' 2>/dev/null | sort
	} | sha256sum | cut -c1-32
}
# fedora_backoff: fail at once, downloading nothing, when the last try of kernel-VER
# failed in this same state less than FAILED_BACKOFF seconds ago
fedora_backoff() {
	local f=$CACHE/.failed/kernel-$VER t st line
	[[ -f $f ]] || return 0
	{ read -r t && read -r st && IFS= read -r line; } <"$f" 2>/dev/null || return 0
	[[ $t =~ ^[0-9]+$ && $st == "$(fedora_state)" ]] || return 0
	(($(date +%s) - t < FAILED_BACKOFF)) || return 0
	fail "${line%%$'\t'*} (not tried again: nothing changed since that try at $(date -u -d "@$t" +%Y-%m-%dT%H:%M:%SZ); tried again after $(date -u -d "@$((t + FAILED_BACKOFF))" +%Y-%m-%dT%H:%M:%SZ), or when a setting, dnf's repository metadata (dnf makecache) or $CACHE changes)" "${line#*$'\t'}"
}
# gave_up CAUSE REMEDY: fail, remembering the failure and the state it was made in
gave_up() {
	local f=$CACHE/.failed/kernel-$VER
	if ! { mkdir -p "$CACHE/.failed" && printf '%s\n%s\n%s\t%s\n' "$(date +%s)" "$(fedora_state)" "$1" "$2" >"$f.$$" &&
		mv -f "$f.$$" "$f"; } 2>/dev/null; then
		rm -f "$f.$$" # best effort: without it the next try downloads again
	fi
	fail "$1" "$2"
}

# from_koji WHY: kernel-VER.src.rpm from Koji's package layout
# (TOPURL/packages/kernel/V/R/src/, then the copies signed by each key rpm trusts,
# data/signed/KEYID/src/) into SRPM, with SIG (rpmkeys --checksig's verdict): only
# a copy whose signature rpm verifies with a key it trusts (nothing else vouches for
# it). WHY: why the repositories did not serve it.
from_koji() {
	local why=$1 top v=${VER%%-*} r=${VER#*-} url urls=() k d=$WORK/koji out tried=()
	[[ $VER == *-* && -n $r ]] || gave_up "$why; Koji's package layout needs the kernel's release (kernel $KREL names none)" "$(fedora_remedy)"
	top=$(koji_topurl)
	[[ -n $top ]] || gave_up "$why; no topurl in /etc/koji.conf or /etc/koji.conf.d/*.conf to find Koji's package layout" "$(fedora_remedy)"
	command -v curl >/dev/null || gave_up "$why; curl is not installed to read Koji's package layout" "$(fedora_remedy)"
	urls=("$top/packages/kernel/$v/$r/src/kernel-$VER.src.rpm")
	while IFS= read -r k; do
		k=${k,,}
		[[ $k =~ ^[0-9a-f]{8,}$ ]] && urls+=("$top/packages/kernel/$v/$r/data/signed/${k: -8}/src/kernel-$VER.src.rpm")
	done < <(rpm -q gpg-pubkey --qf '%{VERSION}\n' 2>/dev/null || true)
	mkdir -p "$d"
	for url in "${urls[@]}"; do
		rm -f "$d/kernel-$VER.src.rpm"
		say "$why: from Koji's package layout, $url"
		if ! out=$(curl -fsSL --retry 2 --max-time "$TIMEOUT" -o "$d/kernel-$VER.src.rpm" "$url" 2>&1); then
			tried+=("${url#"$top"/} ($(tail -n1 <<<"$out" | sed -E 's#[a-z]+://[^ ]*/##g' | cut -c1-80))")
			continue
		fi
		BYTES=$(stat -c %s "$d/kernel-$VER.src.rpm")
		if SIG=$(rpmkeys --checksig "$d/kernel-$VER.src.rpm" 2>&1) && [[ $SIG == *"signatures OK"* ]]; then
			SRPM=$d/kernel-$VER.src.rpm KOJI_URL=${url#"$top"/}
			return 0
		fi
		tried+=("${url#"$top"/} (rpmkeys --checksig: ${SIG##*: })")
	done
	local IFS=';'
	gave_up "$why; Koji's package layout served no kernel-$VER.src.rpm signed by a key rpm trusts (tried:${tried[*]/#/ })" "$(fedora_remedy)"
}

# from_fedora: keep the rxe part of kernel-VER.src.rpm (VER: its N-V-R)
from_fedora() {
	local d=$WORK/dnf rc=0 dnf='' args=() srpm='' sig served=repository why=''
	local remedy="on a host that reaches the repository run dnf download --srpm kernel-$VER (dnf4: --source) and put it in $CACHE/, $AGAIN"
	if command -v dnf5 >/dev/null; then
		dnf=dnf5 args=(download --srpm)
	elif command -v dnf >/dev/null; then
		dnf=dnf args=(download --source)
	else
		why="dnf is not installed"
	fi
	fedora_backoff
	mkdir -p "$d"
	if [[ -n $dnf ]]; then
		say "$dnf ${args[*]} kernel-$VER"
		timeout -k 10 "$TIMEOUT" "$dnf" "${args[@]}" --destdir "$d" "kernel-$VER" >"$WORK/dnf.log" 2>&1 || rc=$?
		srpm=$(find "$d" -maxdepth 1 -name 'kernel-*.src.rpm' -print -quit)
	fi
	# A repository dnf cannot read (a third party's without metadata, one that
	# does not answer) stops the whole command where it is not marked
	# skip_if_unavailable (Fedora's own repositories say False): then once more
	# with every repository that cannot be read skipped (--setopt, a repository
	# glob, dnf5 and dnf4 alike), so that one serving the source RPM still serves
	# it; the first run's line names what could not be read.
	local unread=''
	if [[ -n $dnf && -z $srpm ]] && ((rc != 124 && rc != 137)) &&
		unread=$(grep -m1 'Failed to download metadata' "$WORK/dnf.log" | sed -E 's#[a-z]+://[^ ]*/##g' | cut -c1-200); then
		cat "$WORK/dnf.log" >&2
		say "$dnf could not read a repository ($unread): again, skipping those it cannot read"
		rc=0
		timeout -k 10 "$TIMEOUT" "$dnf" "${args[@]}" --setopt='*.skip_if_unavailable=True' --destdir "$d" "kernel-$VER" >"$WORK/dnf.log" 2>&1 || rc=$?
		srpm=$(find "$d" -maxdepth 1 -name 'kernel-*.src.rpm' -print -quit)
	fi
	if [[ -n $dnf ]] && { ((rc != 0)) || [[ -z $srpm ]]; }; then
		cat "$WORK/dnf.log" >&2
		srpm=''
		if ((rc == 124 || rc == 137)); then
			why="$dnf download of kernel-$VER did not finish in $TIMEOUT s (fetch_timeout)"
		else
			local err
			# dnf's last words (it may print none: the exit status then)
			err=$(grep -vE '^[[:space:]]*$' "$WORK/dnf.log" | tail -n1 | sed -E 's#[a-z]+://[^ ]*/##g' | cut -c1-200 || true)
			# (dnf5 exits 0 having downloaded nothing when the package's source
			# repository is gone)
			((rc != 0)) || err="it exited 0 but downloaded no source RPM: no reachable repository serves it"
			[[ -z $unread ]] || err+="; it could not read: $unread"
			why="$dnf ${args[*]} kernel-$VER failed (${err:-exit $rc, no message})"
		fi
	fi
	local SRPM='' SIG='' KOJI_URL=''
	if [[ -n $why ]]; then
		# the repositories index the newest build (and the release's first) only:
		# the archive of record keeps every build
		[[ $ARCHIVE == auto ]] ||
			gave_up "$why; archive=never (rxe-kvfix.conf): Koji's package layout not tried" "$(fedora_remedy)"
		from_koji "$why"
		srpm=$SRPM sig=$SIG served=koji
		say "kernel-$VER.src.rpm from Koji's package layout ($KOJI_URL): rpmkeys --checksig: ${sig##*: }"
	fi
	[[ -z $unread || $served == koji ]] || say "ignored the repositories $dnf could not read: kernel-$VER came from one it read"
	# shellcheck disable=SC2034  # T1: read by stats (kmod/rxe-kvfix-fetch)
	T1=$(date +%s.%N) BYTES=$(stat -c %s "$srpm")
	# dnf checked the file against the repository's metadata; rpm's own digests
	# and, where the key is imported, its signature (from_koji checked it already)
	if [[ $served == repository ]] && { ! sig=$(rpmkeys --checksig "$srpm" 2>&1) || [[ $sig == *"NOT OK"* ]]; }; then
		fail "$(basename "$srpm") fails rpmkeys --checksig (${sig##*: })" "$remedy"
	fi
	[[ $served == repository ]] || remedy=$(fedora_remedy)
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
	local verified="$dnf (the repository metadata's checksum); rpmkeys --checksig: ${sig##*: }"
	[[ $served == repository ]] || verified="rpmkeys --checksig (a key rpm trusts): ${sig##*: }; from Koji's package layout, $KOJI_URL"
	# shellcheck disable=SC2034  # read by stats (kmod/rxe-kvfix-fetch)
	ORIGIN=$([[ $served == repository ]] && echo dnf || echo koji)
	rm -f "$CACHE/.failed/kernel-$VER"
	keep_tree "$top" "kernel-$VER.rxe.tar.xz" "package=kernel (source RPM)
file=$(basename "$srpm")
sha256=$(sha256sum "$srpm" | cut -d' ' -f1)
bytes=$BYTES
archive=$served
verified=$verified
distribution=$n patch file(s) with an rxe part applied"
}
