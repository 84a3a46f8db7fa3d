# shellcheck shell=bash
# rxe-kvfix-fetch-debian.sh: the Debian half of kmod/rxe-kvfix-fetch, which sources
# it from beside itself (and calls from_deb, download_binary, from_archive); not
# executed. It uses the fetch's globals (KREL VER XY UPSTREAM CACHE TIMEOUT WORK
# TREE_OUT AGAIN T1 BYTES ORIGIN ARCHIVE) and helpers (fail say keep_tree stats).
#
#   1. apt-get download linux-source-X.Y=VERSION (Ubuntu's linux-source-X.Y.Z: the
#      identity's KERNEL_SRCBIN): the binary package Debian builds from the kernel's source (its hash is checked by apt against the archive's
#      signed index; apt-get download takes no apt or dpkg lock, so this runs
#      inside a kernel package's installation). With --deb, such a .deb put in the
#      cache by hand instead (from_deb).
#   2. Where the archive serves no such package (Debian keeps linux-source-X.Y for
#      few series; Ubuntu's HWE source packages build none), the source package of
#      VERSION (KERNEL_SRCPKG: linux, or e.g. linux-hwe-7.0) from the source archive:
#      a private deb-src list made from this host's own apt sources, with its own
#      lists directory (the host's lists are never updated; a source it cannot
#      read, such as a third party's without a Release file, is ignored when
#      another one's signed index holds VERSION), then
#      apt-get source --download-only, each file checked against the SHA-256 of the
#      signed Sources index. Debian's patches (debian/patches/series, format 3.0)
#      or Ubuntu's diff (the .diff.gz of format 1.0, which carries the stable
#      updates over the X.Y tarball) are applied where they touch the rxe directory. When the archive serves the upstream
#      tarball of the version but not Debian's part (some mirrors answer 404 for
#      old revisions), the upstream source is used and the provenance says so.
#   3. Where no configured suite indexes VERSION any more, the snapshot archive
#      (snapshot_index, below; archive=never turns it off). The provenance's
#      archive= line says which served it: repository or snapshot.

# apt_err LOG: apt's error, short and without the archive's address: a failed
# download as "FILE: 404 Not Found" (the upstream tarball's when it is among
# them: without it nothing can be built), else apt's last error line
apt_err() {
	local f
	f=$(grep -m1 -E '^E: Failed to fetch [^ ]*orig\.tar' "$1" || grep -m1 '^E: Failed to fetch' "$1" || true)
	if [[ -n $f ]]; then
		sed -E 's#^E: Failed to fetch [^ ]*/([^/ ]+)[[:space:]]+#\1: #; s/ *\[IP:[^]]*\]//; s/  +/ /g; s/ +$//; s/%7e/~/g; s/%2b/+/g' <<<"$f" | cut -c1-200
	else
		grep -E '^(E|Err):|Hash Sum mismatch|unexpected size' "$1" | tail -n1 | sed -E 's#[a-z]+://[^ ]*/##g' | cut -c1-200
	fi
}
# apt_unread LOG: the sources an apt-get update could not read, from its "Err:N
# SOURCE FILE" lines and the reason under each, as "SOURCE FILE: REASON; ...":
# first those whose index failed (their Release was read: an archive that is
# there), then those whose Release failed (none there, or unreachable)
apt_unread() {
	awk '/^Err:[0-9]+ / { n = $1; sub(/^Err:[0-9]+ /, ""); what = $0; getline r
			if (seen[n]++) next
			sub(/^ +/, "", r); sub(/ - .*/, "", r); sub(/ *\[IP:[^]]*\]/, "", r)
			print (what ~ /(In)?Release$/ ? 1 : 0) "\t" what ": " r }' "$1" |
		sort -s -t$'\t' -k1,1 | cut -f2 | paste -sd';' - | sed 's/;/; /g' | cut -c1-400
}
not_found() { grep -qE "Can't find a source to download version|Version '.*' for '.*' was not found|Unable to locate package|Couldn't find any package by|Unable to find a source package" "$1"; }

# --- 1. the binary package linux-source-X.Y ----------------------------------
ORIGIN=$KERNEL_SRCBIN
SRCPKG=${KERNEL_SRCPKG:-linux}
VERIFIED="apt (the .deb's hash in the archive index signed by its Release key)"
# download_binary: sets DEB, or leaves it empty when the archive serves no such
# package (then the source archive is tried)
DEB='' DEB_ARCHIVE=''
download_binary() {
	local pkg=$KERNEL_SRCBIN d=$WORK/bin rc=0
	mkdir -p "$d"
	say "apt-get download $pkg=$VER"
	(cd "$d" && timeout -k 10 "$TIMEOUT" apt-get download -q "$pkg=$VER") >"$WORK/bin.log" 2>&1 || rc=$?
	if ((rc != 0)); then
		if not_found "$WORK/bin.log"; then return 0; fi
		cat "$WORK/bin.log" >&2
		((rc != 124 && rc != 137)) ||
			fail "apt-get download $pkg=$VER did not finish in $TIMEOUT s (fetch_timeout)" \
				"on a host that reaches the archive run apt-get download $pkg=$VER, put that .deb in $CACHE/, $AGAIN"
		fail "apt-get download $pkg=$VER failed ($(apt_err "$WORK/bin.log"))" \
			"on a host that reaches the archive run apt-get download $pkg=$VER, put that .deb in $CACHE/, $AGAIN"
	fi
	DEB=$(find "$d" -maxdepth 1 -name "${pkg}_*.deb" -print -quit) DEB_ARCHIVE=repository
	[[ -n $DEB ]] || fail "apt-get download $pkg=$VER left no .deb" "report it; $AGAIN"
	T1=$(date +%s.%N) BYTES=$(stat -c %s "$DEB")
}

# from_deb DEB: keep (or unpack whole, --tree) the source in a linux-source .deb
from_deb() {
	local deb=$1 pkg=$KERNEL_SRCBIN inner sum
	sum=$(sha256sum "$deb" | cut -d' ' -f1)
	local irc=0
	inner=$(rxe_kvfix_deb_inner "$deb") || irc=$?
	((irc != 1)) || fail "$(basename "$deb") is not a whole .deb (corrupt or truncated)" "run apt-get clean, $AGAIN"
	((irc == 0)) || fail "$(basename "$deb") holds no /usr/src/linux-source-*.tar.*" "use the $pkg package's .deb, $AGAIN"
	if [[ -n $TREE_OUT ]]; then
		mkdir -p "$TREE_OUT"
		dpkg-deb --fsys-tarfile "$deb" | tar -xO "$inner" | tar -x -f - --"$(rxe_kvfix_tar_filter "$inner")" \
			-C "$TREE_OUT" --strip-components=1 || fail "cannot unpack $inner into $TREE_OUT" "check the space there"
		stats "tree=$TREE_OUT" "$(du -sb "$TREE_OUT" | cut -f1)"
		return 0
	fi
	local top rc=0
	# the extraction's status alone: a stream cut short is its decompressor's
	# error, and dpkg-deb has read the .deb whole already (rxe_kvfix_deb_inner)
	top=$(
		set +o pipefail
		dpkg-deb --fsys-tarfile "$deb" | tar -xO "$inner" |
			rxe_kvfix_extract_rxe - "$WORK/bin-x" "$(rxe_kvfix_tar_filter "$inner")"
	) || rc=$?
	((rc != 1)) || fail "cannot unpack $inner from $(basename "$deb") (${top%%$'\t'*})" "run apt-get clean, $AGAIN"
	((rc == 0)) || fail "$(basename "$deb") has no $DRIVER_DIR/rxe_mr.c" "report it; $AGAIN"
	keep_tree "$top" "${pkg}_$VER.tar.xz" \
		"package=$pkg
file=$(basename "$deb")
sha256=$sum${DEB_ARCHIVE:+
archive=$DEB_ARCHIVE}
bytes=$(stat -c %s "$deb")
verified=$VERIFIED"
}

# --- 2. the source package linux, from the source archive ---------------------
# private_sources DIR: this host's apt sources (one-line and deb822), each deb
# entry turned into deb-src, in DIR/sources.list and DIR/sources.list.d/. All of
# them, not only those whose Release names the distribution as its origin: a
# kernel's source package may come from a mirror or local archive without one, a
# derivative's or a PPA's; which source holds it is told by the signed indexes
# read (from_archive), and one that cannot be read is then no reason to fail.
private_sources() {
	local dir=$1 sl sp f
	eval "$(apt-config shell sl Dir::Etc::SourceList/f sp Dir::Etc::SourceParts/d)"
	mkdir -p "$dir/sources.list.d"
	: >"$dir/sources.list"
	for f in "${sl:-/etc/apt/sources.list}" "${sp:-/etc/apt/sources.list.d/}"*.list; do
		[[ -f $f ]] || continue
		sed -nE 's/^[[:space:]]*deb([[:space:]]+)/deb-src\1/p' "$f" >>"$dir/sources.list"
	done
	for f in "${sp:-/etc/apt/sources.list.d/}"*.sources; do
		[[ -f $f ]] || continue
		# paragraph by paragraph: a stanza whose Types has deb gets Types: deb-src
		awk 'BEGIN { RS = ""; ORS = "\n\n" }
			{ n = split($0, l, "\n"); out = ""; deb = 0; off = 0
			  for (i = 1; i <= n; i++) {
				if (l[i] ~ /^Types:/) { if (l[i] ~ /[: ]deb( |$)/) deb = 1; l[i] = "Types: deb-src" }
				if (l[i] ~ /^Enabled:[[:space:]]*no/) off = 1
				out = out l[i] "\n" }
			  if (deb && !off) printf "%s\n", out }' "$f" >"$dir/sources.list.d/$(basename "$f")"
	done
	[[ -s $dir/sources.list || -n $(find "$dir/sources.list.d" -type f -size +0) ]]
}

from_archive() {
	local a=$WORK/apt d=$WORK/src rc=0
	local remedy="put the kernel's source tarball in $CACHE/ as linux-$UPSTREAM.tar.xz (kernel.org's, or Debian's linux_$UPSTREAM.orig.tar.xz renamed) or pass --kernel-tree DIR to rxe-kvfix-prepare; $AGAIN"
	# Ubuntu's orig tarball is the X.Y release (its diff carries the stable updates):
	# the tree to give is the source package unpacked
	[[ $KERNEL_FAMILY != ubuntu ]] ||
		remedy="on a host that reaches the archive run apt-get source $SRCPKG=$VER (it unpacks the tree) and pass that tree with --kernel-tree DIR to rxe-kvfix-prepare, or reach the archive from here; $AGAIN"
	private_sources "$a" || fail "this host's apt sources name no Debian archive" "$remedy"
	APTO=(-o "Dir::Etc::SourceList=$a/sources.list" -o "Dir::Etc::SourceParts=$a/sources.list.d"
		-o "Dir::State::Lists=$a/lists" -o "Dir::Cache=$a/cache" -o "Acquire::GzipIndexes=true"
		-o "APT::Sandbox::User=root")
	mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$d"
	say "no $KERNEL_SRCBIN=$VER in this host's archive: source package $SRCPKG=$VER from the source archive"
	# One source that cannot be read (a third party's without a Release file or
	# unreachable) fails the whole update, but apt still reads every other one: the
	# update's status decides nothing; the signed index that holds the exact
	# version does. Only when no source read holds it is apt's error the cause.
	timeout -k 10 "$TIMEOUT" apt-get "${APTO[@]}" -q update >"$WORK/upd.log" 2>&1 || rc=$?
	((rc != 124 && rc != 137)) ||
		fail "apt-get update of the source archive's index did not finish in $TIMEOUT s (fetch_timeout)" "$remedy"
	# the stanza of exactly VERSION: its files and their SHA-256 from the signed index
	apt-cache "${APTO[@]}" showsrc --only-source "$SRCPKG" 2>/dev/null |
		awk -v v="$VER" 'BEGIN { RS = "" } index($0, "\nVersion: " v "\n") { print; exit }' >"$WORK/stanza" || true
	local served=repository
	if [[ ! -s $WORK/stanza ]]; then
		# the configured suites index it no more (a newer upload replaced it, or
		# the source is unreadable): the snapshot archive, unless archive=never
		if [[ $ARCHIVE == auto ]] && snapshot_index; then
			served=snapshot
		elif ((rc != 0)); then
			cat "$WORK/upd.log" >&2
			fail "cannot read the source archive's index: no source apt read indexes the source package $SRCPKG $VER, and it could not read $(apt_unread "$WORK/upd.log" | grep . || apt_err "$WORK/upd.log")${SNAP_WHY:+; $SNAP_WHY}" "$remedy"
		else
			fail "the archive this host's apt knows serves neither $KERNEL_SRCBIN=$VER nor the source package $SRCPKG $VER${SNAP_WHY:+; $SNAP_WHY}" \
				"$remedy"
		fi
	fi
	((rc == 0)) || [[ $served == snapshot ]] || say "ignored what apt could not read ($(apt_unread "$WORK/upd.log" | grep . || apt_err "$WORK/upd.log")): $SRCPKG $VER is in the signed index of a source it read"
	awk '/^Checksums-Sha256:/ { on = 1; next } /^[^ ]/ { on = 0 } on && NF == 3 { print $1, $2, $3 }' \
		"$WORK/stanza" >"$WORK/sums"
	say "apt-get source --download-only $SRCPKG=$VER"
	rc=0
	(cd "$d" && timeout -k 10 "$TIMEOUT" apt-get "${APTO[@]}" -q source --download-only "$SRCPKG=$VER") >"$WORK/src.log" 2>&1 || rc=$?
	((rc != 124 && rc != 137)) ||
		fail "apt-get source $SRCPKG=$VER did not finish in $TIMEOUT s (fetch_timeout)" "$remedy"
	# shellcheck disable=SC2034  # read by stats (kmod/rxe-kvfix-fetch)
	T1=$(date +%s.%N)
	# every file apt left must match the index; a missing one is told apart by role
	local sum name orig='' debtar='' diffgz='' missing=()
	while read -r sum _ name; do
		if [[ ! -f $d/$name ]]; then
			missing+=("$name")
			continue
		fi
		if [[ $(sha256sum "$d/$name" | cut -d' ' -f1) != "$sum" ]]; then
			rm -f "$d/$name"
			fail "$name does not match the SHA-256 of the archive's signed index (corrupt download)" "$remedy"
		fi
		BYTES=$((BYTES + $(stat -L -c %s "$d/$name"))) # apt links a file: archive's files
		case $name in
		*.orig.tar.*) orig=$name ;;
		*.debian.tar.*) debtar=$name ;;
		*.diff.gz) diffgz=$name ;;
		esac
	done <"$WORK/sums"
	if [[ -z $orig ]]; then
		cat "$WORK/src.log" >&2
		fail "apt-get source $SRCPKG=$VER failed ($(apt_err "$WORK/src.log"))" "$remedy"
	fi
	local origin
	origin="package=$SRCPKG (source)
files=$(awk '{ printf "%s%s", sep, $3; sep = " " }' "$WORK/sums")
sha256=$(grep -F " $orig" "$WORK/sums" | cut -d' ' -f1) ($orig)
bytes=$BYTES
archive=$served
verified=apt (SHA-256 of each file against the archive's Sources index, signed by its Release key${SNAP_ID:+; the snapshot $SNAP_ID, its Release past Valid-Until accepted, its signature checked})"
	local top
	if [[ -n $TREE_OUT ]]; then
		mkdir -p "$TREE_OUT"
		tar -xf "$d/$orig" -C "$TREE_OUT" --strip-components=1 || fail "cannot unpack $orig into $TREE_OUT" "check the space there"
		top=$TREE_OUT
	else
		rc=0
		top=$(rxe_kvfix_extract_rxe "$d/$orig" "$WORK/src-x") || rc=$?
		((rc != 1)) || fail "cannot unpack $orig (${top%%$'\t'*})" "$remedy"
		((rc == 0)) || fail "$orig has no $DRIVER_DIR/rxe_mr.c" "report it; $AGAIN"
	fi
	rm -f "$d/$orig"
	# shellcheck disable=SC2034  # ORIGIN: read by stats (kmod/rxe-kvfix-fetch)
	if [[ -n $debtar ]]; then
		debian_patches "$d/$debtar" "$top"
		ORIGIN=$SRCPKG
		origin+=$'\n'"debian=$debtar: $DEBIAN_APPLIED"
	elif [[ -n $diffgz ]]; then
		debian_diff "$d/$diffgz" "$top"
		ORIGIN=$SRCPKG
		origin+=$'\n'"debian=$diffgz: $DEBIAN_APPLIED"
	else
		ORIGIN=linux-orig
		origin+=$'\n'"debian=not served ($(grep -E '^(E|Err):.*debian\.tar' "$WORK/src.log" | head -n1 | grep -oE '[0-9]{3} +[A-Za-z ]*[A-Za-z]' | tr -s ' ' | head -n1 || echo missing)): the upstream source of $UPSTREAM, Debian's patches not applied"
		say "Debian's part of linux $VER is not served (${missing[*]:-}): using the upstream source of $UPSTREAM"
	fi
	if [[ -n $TREE_OUT ]]; then
		printf '%s\n' "$origin" >"$TREE_OUT/.rxe-kvfix-provenance"
		stats "tree=$TREE_OUT" "$(du -sb "$TREE_OUT" | cut -f1)"
	elif [[ -n $debtar$diffgz ]]; then
		keep_tree "$top" "${KERNEL_SRCBIN}_$VER.tar.xz" "$origin"
	else
		keep_tree "$top" "linux-$UPSTREAM.tar.xz" "$origin"
	fi
}

# --- 3. the archive of record: the snapshot archive ---------------------------
# When no configured suite indexes VERSION any more (a newer upload replaced it: the
# running kernel of a host that installs rxe-kvfix after a newer kernel was
# published), the snapshot archive still holds it. Its address is apt's own: the
# Snapshots field of the configured archive's Release file (Ubuntu's has one, and any
# archive may), else apt's table of known archives (Acquire::Snapshots::URI, apt 2.7
# and later), printed offline by apt-get -o APT::Snapshot=ID --print-uris update;
# nothing here names a host. Where that address has the layout ROOT/archive/NAME/ID/,
# the service's machine-readable interface ROOT/mr/package/SRC/VERSION/srcfiles
# ?fileinfo=1 tells in which snapshot (the first_seen of the .dsc in archive NAME) the
# version is. apt itself then reads that snapshot, as it reads the configured archive:
# its InRelease verified with the keys apt trusts for the configured source (its
# Signed-By), the Sources index by the hash in it, each file by the SHA-256 in that
# (from_archive). Only Valid-Until is not checked (a snapshot's Release is past it by
# design; the version asked for is exact, so an older index gains an attacker nothing).
#
# The snapshot of the moment this host installed the kernel's package (dpkg's file
# list's time) is tried too: then its configured archive indexed that version, so a
# snapshot of it then holds it. It is what a snapshot address without the mr
# interface gets (Ubuntu's snapshot service, which resolves any timestamp), and the
# second try after the mr interface's (a version that reached this host's suite after
# its first upload, e.g. testing after unstable).
#
# Ubuntu: its snapshot archive (the Release's Snapshots field) is read and verified
# the same way, by the Ubuntu archive key apt already trusts for the configured
# source. Launchpad's published sources are not used: its files are signed only by
# their uploader, whose key apt does not hold, and its API names no signed index; the
# snapshot archive is the same upload under the archive's own signature.
#
# No download storm: when the snapshot archive does not hold the version (the mr
# interface answers 404 or names no .dsc of it, or the snapshot's index lacks it), the
# miss is kept in CACHE/.archive-miss/SRC_VERSION with the snapshot addresses asked;
# the snapshot archive is not asked again for it before ARCHIVE_BACKOFF seconds (a
# day) unless those addresses changed (the host's apt sources)
# or the file is deleted. The configured archive is read on each try as before (apt's
# own update; a source now indexing the version serves it at once), and a file dropped
# in the cache is taken before any fetch. A transient failure (no answer) is no miss.
# installed_at: the snapshot ID (YYYYMMDDTHHMMSSZ) of when dpkg last unpacked the
# kernel's headers or image package here (its file list's time), or nothing
installed_at() {
	local f t=''
	for f in /var/lib/dpkg/info/linux-{headers,image,image-unsigned}-"$KREL"{,:*}.list; do
		[[ -f $f ]] || continue
		t=$(date -u -r "$f" +%Y%m%dT%H%M%SZ)
		break
	done
	printf '%s\n' "$t"
}
ARCHIVE=${ARCHIVE:-auto}
readonly ARCHIVE_BACKOFF=86400
SNAP_ID='' SNAP_WHY=''
snapshot_index() {
	local helper=/usr/lib/apt/apt-helper tmpl t root name ids id enc miss key now
	tmpl=$(apt-get "${APTO[@]}" -o APT::Snapshot=RXEKVFIXID --print-uris update 2>/dev/null |
		sed -nE "s#^'([^']*/)RXEKVFIXID/dists/.*#\1#p" | sort -u || true)
	if [[ -z $tmpl ]]; then
		SNAP_WHY="apt knows no snapshot archive of this host's sources (no Snapshots field in their Release, none in apt's table, or apt older than 2.7)"
		return 1
	fi
	miss=$CACHE/.archive-miss/${SRCPKG}_$VER
	key=$(printf '%s\n' "$tmpl" | sha256sum | cut -c1-16)
	now=$(date +%s)
	if [[ -f $miss ]] && [[ $(sed -n 's/^key=//p' "$miss") == "$key" ]] &&
		((now - $(sed -n 's/^when=//p' "$miss") < ARCHIVE_BACKOFF)); then
		SNAP_WHY="the snapshot archive did not hold it on $(date -u -d "@$(sed -n 's/^when=//p' "$miss")" +%Y-%m-%dT%H:%M:%SZ) ($(sed -n 's/^why=//p' "$miss")); not asked again before $(date -u -d "@$(($(sed -n 's/^when=//p' "$miss") + ARCHIVE_BACKOFF))" +%Y-%m-%dT%H:%M:%SZ) unless $miss is deleted"
		return 1
	fi
	[[ -x $helper ]] || {
		SNAP_WHY="no $helper to ask the snapshot archive"
		return 1
	}
	# the version in a URL: an epoch's ':', '+' and '~' escaped
	enc=$(sed 's/:/%3A/g; s/+/%2B/g; s/~/%7E/g' <<<"$VER")
	local why='' found=0 asked=0 transient=0 inst
	inst=$(installed_at)
	for t in $tmpl; do
		ids=''
		if [[ $t =~ ^(.*)/archive/([^/]+)/$ ]]; then
			root=${BASH_REMATCH[1]} name=${BASH_REMATCH[2]}
			say "the snapshot archive ($name): which snapshot holds $SRCPKG $VER"
			rm -f "$WORK/mr.json"
			if ! timeout -k 10 "$TIMEOUT" "$helper" download-file "$root/mr/package/$SRCPKG/$enc/srcfiles?fileinfo=1" "$WORK/mr.json" >"$WORK/mr.log" 2>&1; then
				if grep -q '404' "$WORK/mr.log"; then
					# the interface knows every snapshot: none holds it
					asked=1 why+="${why:+; }$name: no $SRCPKG $VER in the snapshot archive (404)"
				else
					transient=1 why+="${why:+; }$name: the snapshot archive did not answer ($(grep -m1 -E '^E:' "$WORK/mr.log" | sed -E 's#[a-z]+://[^ ]*##g' | cut -c1-120))"
				fi
				continue
			fi
			asked=1
			# fileinfo: one object per file and archive, no nested braces: a line each
			ids=$(tr '{}' '\n' <"$WORK/mr.json" | grep -F "\"${SRCPKG}_${VER#*:}.dsc\"" |
				grep -E "\"archive_name\": *\"$name\"" | sed -nE 's/.*"first_seen": *"([0-9]{8}T[0-9]{6}Z)".*/\1/p' | sort -u)
			[[ -n $ids ]] || why+="${why:+; }$name: no ${SRCPKG}_${VER#*:}.dsc of it in its answer"
		else
			# no machine-readable interface known (Ubuntu's snapshot service): the
			# snapshot of the moment this host installed the kernel's package, when
			# its configured archive indexed that version
			name=${t%/}
			[[ -n $inst ]] || {
				why+="${why:+; }$name: no mr interface, and no install time of the kernel's package to take the snapshot of"
				continue
			}
		fi
		# after the first upload's snapshot, the one of the kernel's installation here
		# (a version that reached this host's suites later, e.g. by migration)
		[[ -z $inst || " $ids " == *" $inst "* ]] || ids+="${ids:+ }$inst"
		for id in $ids; do
			# a copy of the private lists: apt finds the snapshot's address in the
			# configured archive's Release there, and an update prunes what it does
			# not list
			rm -rf "$WORK/snap" && mkdir -p "$WORK/snap" && cp -a "$WORK/apt/lists" "$WORK/snap/lists"
			say "apt-get update from the snapshot $id"
			timeout -k 10 "$TIMEOUT" apt-get "${APTO[@]}" -o "Dir::State::Lists=$WORK/snap/lists" -o APT::Snapshot="$id" \
				-o Acquire::Check-Valid-Until=false -q update >"$WORK/snap.log" 2>&1 || true
			apt-cache "${APTO[@]}" -o "Dir::State::Lists=$WORK/snap/lists" -o APT::Snapshot="$id" showsrc --only-source "$SRCPKG" 2>/dev/null |
				awk -v v="$VER" 'BEGIN { RS = "" } index($0, "\nVersion: " v "\n") { print; exit }' >"$WORK/stanza" || true
			if [[ -s $WORK/stanza ]]; then
				found=1 SNAP_ID=$id
				APTO+=(-o "Dir::State::Lists=$WORK/snap/lists" -o APT::Snapshot="$id" -o Acquire::Check-Valid-Until=false)
				break 2
			fi
			rm -rf "$WORK/snap/lists"
			! grep -q -E '^(E|Err):' "$WORK/snap.log" || transient=1
			why+="${why:+; }$name: the snapshot $id does not index it in this host's suites$(grep -q -E '^(E|Err):' "$WORK/snap.log" && printf ' (%s)' "$(apt_unread "$WORK/snap.log" | grep . || apt_err "$WORK/snap.log")")"
		done
	done
	if ((found)); then
		rm -f "$miss"
		say "$SRCPKG $VER is in the snapshot $SNAP_ID, its signed index read by apt"
		return 0
	fi
	SNAP_WHY="the snapshot archive: ${why:-nothing asked}"
	if ((asked && !transient)) && mkdir -p "$CACHE/.archive-miss" 2>/dev/null; then
		printf 'key=%s\nwhen=%s\nwhy=%s\n' "$key" "$now" "$why" >"$miss" 2>/dev/null || true
	fi
	return 1
}

# debian_patches DEBIAN_TARBALL TOP: apply Debian's patch series to TOP: all of
# it for a whole tree, the parts touching the rxe directory for a kept one
DEBIAN_APPLIED=''
debian_patches() {
	local tb=$1 top=$2 p n=0 r=0 opt
	mkdir -p "$WORK/deb"
	tar -xf "$tb" -C "$WORK/deb" debian/patches 2>/dev/null || {
		DEBIAN_APPLIED="no debian/patches"
		return 0
	}
	[[ -f $WORK/deb/debian/patches/series ]] || {
		DEBIAN_APPLIED="no series"
		return 0
	}
	while read -r p opt; do
		[[ -n $p && $p != \#* ]] || continue
		opt=${opt:--p1}
		n=$((n + 1))
		if [[ -n $TREE_OUT ]]; then
			patch -d "$top" "$opt" --batch --forward --no-backup-if-mismatch -s <"$WORK/deb/debian/patches/$p" >/dev/null ||
				fail "Debian's patch $p does not apply to the upstream source of $UPSTREAM" "report it"
		elif grep -q "$DRIVER_DIR/" "$WORK/deb/debian/patches/$p"; then
			rxe_kvfix_rxe_diff <"$WORK/deb/debian/patches/$p" >"$WORK/rxe.diff"
			[[ -s $WORK/rxe.diff ]] || fail "cannot tell the rxe part of Debian's patch $p (not a git diff)" "report it"
			patch -d "$top" "$opt" --batch --forward --no-backup-if-mismatch -s <"$WORK/rxe.diff" >/dev/null ||
				fail "the rxe part of Debian's patch $p does not apply to the upstream source of $UPSTREAM" "report it"
			r=$((r + 1))
		fi
	done <"$WORK/deb/debian/patches/series"
	if [[ -n $TREE_OUT ]]; then
		DEBIAN_APPLIED="$n patches of debian/patches/series applied"
	else
		DEBIAN_APPLIED="$r of the $n patches of debian/patches/series touch $DRIVER_DIR, applied"
	fi
}

# debian_diff DIFF_GZ TOP: a format 1.0 source package's diff (Ubuntu's kernel: the
# stable updates and Ubuntu's changes over the X.Y tarball, and debian/): all of it
# for a whole tree, the hunks of files in the rxe directory for a kept one
debian_diff() {
	local gz=$1 top=$2 n
	if [[ -n $TREE_OUT ]]; then
		zcat "$gz" | patch -d "$top" -p1 --batch --forward --no-backup-if-mismatch -s >/dev/null ||
			fail "the diff $(basename "$gz") does not apply to its source" "report it"
		DEBIAN_APPLIED="the whole diff applied"
		return 0
	fi
	# the top Makefile's hunks too: the orig is the X.Y release (SUBLEVEL = 0) and the
	# diff moves SUBLEVEL to the stable update the kernel is (e.g. 7.0.14), which is
	# what the kept source's version must say
	zcat "$gz" | rxe_kvfix_rxe_diff --with-makefile >"$WORK/rxe.diff" ||
		fail "cannot read $(basename "$gz") (corrupt?)" "run apt-get clean, $AGAIN"
	n=$(grep -c "^+++ [^/]*/$DRIVER_DIR/" "$WORK/rxe.diff" || true)
	if [[ -s $WORK/rxe.diff ]]; then
		patch -d "$top" -p1 --batch --forward --no-backup-if-mismatch -s <"$WORK/rxe.diff" >/dev/null ||
			fail "the rxe part of $(basename "$gz") does not apply to its source" "report it"
	fi
	if ((n > 0)); then
		DEBIAN_APPLIED="$n files of $DRIVER_DIR changed by it, applied"
	else
		DEBIAN_APPLIED="no file of $DRIVER_DIR changed by it"
	fi
	! grep -qE '^\+\+\+ [^/]*/Makefile([[:space:]]|$)' "$WORK/rxe.diff" ||
		DEBIAN_APPLIED+="; the top Makefile's version from it: $(rxe_kvfix_tree_version "$top")"
}
