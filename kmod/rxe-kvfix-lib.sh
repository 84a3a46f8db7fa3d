# shellcheck shell=bash
# rxe-kvfix-lib.sh: content checks shared by kmod/rxe-kvfix-prepare and
# patches/validate, and the reader of META. Sourced, not executed.

# classify_why FILE: the classification of an rxe_mr.c and the line it was
# decided on, as CLASS<TAB>LINE<TAB>SOURCE (LINE 0 and a reason in words when no
# line decided it). This is the one place where "does this kernel need the fix"
# is decided, by content and never by version:
#   the assignment to mr->page_info inside __alloc_mr_page_info() names a kv*
#   allocator -> fixed; kzalloc_objs -> affected-kzalloc_objs; kcalloc ->
#   affected-kcalloc; kmalloc_array -> affected-kmalloc_array; anything else ->
#   unknown. No such assignment: pages kept in the xarray mr->page_list (6.12.113
#   and older stable kernels, 6.x before the page_info array) or in the older
#   rxe_map tables -> unaffected; otherwise unknown.
classify_why() { # FILE
	local f=$1 alloc hit rule
	alloc=$(awk '/^static int __alloc_mr_page_info\(/,/^}/ { print FNR ":" $0 }' "$f" |
		grep -E '^[0-9]+:.*mr->page_info[[:space:]]*=' || true)
	if [[ -n $alloc ]]; then
		for rule in 'fixed \bkv(calloc|zalloc_objs|malloc_objs|zalloc|malloc_array|malloc)\b' \
			'affected-kzalloc_objs \bkzalloc_objs\b' 'affected-kcalloc \bkcalloc\b' \
			'affected-kmalloc_array \bkmalloc_array\b' 'unknown .'; do
			hit=$(grep -m1 -E "${rule#* }" <<<"$alloc") || continue
			break
		done
	elif hit=$(grep -n -m1 -E 'xa_(load|store)\(&mr->page_list' "$f"); then
		rule=unaffected
	elif hit=$(grep -n -m1 -E 'mr->map\[|rxe_mr_alloc_map|struct rxe_map\b' "$f"); then
		rule=unaffected
	else
		printf 'unknown\t0\tno assignment to mr->page_info in __alloc_mr_page_info(), no xarray page_list, no rxe_map\n'
		return 0
	fi
	local line=${hit%%:*} text=${hit#*:}
	# the source line without its indentation
	text=${text#"${text%%[![:space:]]*}"}
	printf '%s\t%s\t%s\n' "${rule%% *}" "$line" "$text"
}

# classify FILE: one of the classification tokens of classify_why.
classify() { # FILE
	local why
	why=$(classify_why "$1")
	printf '%s\n' "${why%%$'\t'*}"
}

# rxe_kvfix_tree_version DIR: the version a kernel tree's top Makefile says
# (VERSION.PATCHLEVEL.SUBLEVEL plus EXTRAVERSION, e.g. 7.2.13 or 7.4.0-rc2)
rxe_kvfix_tree_version() {
	awk -F' *= *' '$1 == "VERSION" { v = $2 } $1 == "PATCHLEVEL" { p = $2 }
		$1 == "SUBLEVEL" { s = $2 } $1 == "EXTRAVERSION" { e = $2 }
		END { if (v != "") printf "%s.%s.%s%s\n", v, p, (s == "" ? 0 : s), e }' "$1/Makefile"
}

# rxe_kvfix_status RXE_MR_C: in one line, what classify_why decided for this
# rxe_mr.c, on which line, and what it means for the patches and the DKMS package.
# Returns 1 when the source is of a shape nothing here knows (unknown).
rxe_kvfix_status() { # FILE
	local f=$1 why class line text alloc free_line series
	why=$(classify_why "$f")
	IFS=$'\t' read -r class line text <<<"$why"
	alloc=$(grep -oE '\bk[a-z_]*alloc[a-z_]*\b' <<<"$text" | head -n1 || true)
	series=$(series_for_class "$class")
	case $class in
	affected-kzalloc_objs | affected-kcalloc)
		printf '%s: rxe_mr.c:%s allocates the MR page-info array with %s(), one physically contiguous block (16 B a 4 KiB page: order 11 from 1 GiB + 16 B): it needs the fix, patches/%s is its series and the DKMS package builds it [%s]\n' \
			"$class" "$line" "$alloc" "$series" "$text"
		;;
	affected-kmalloc_array)
		printf '%s: rxe_mr.c:%s allocates the MR page-info array with %s(), physically contiguous: no series is shipped for this shape and the DKMS package refuses it [%s]\n' \
			"$class" "$line" "$alloc" "$text"
		;;
	fixed)
		free_line=$(awk '/^static void free_mr_page_info\(/,/^}/ { if (index($0, "kvfree(mr->page_info)")) { print FNR; exit } }' "$f")
		printf 'fixed: rxe_mr.c:%s allocates the MR page-info array with %s()%s: the fix has landed, nothing to apply, the DKMS package steps aside and the in-tree rdma_rxe stays [%s]\n' \
			"$line" "$alloc" "${free_line:+ and line $free_line frees it with kvfree()}" "$text"
		;;
	unaffected)
		if [[ $text == *page_list* ]]; then
			printf 'unaffected: rxe_mr.c:%s keeps the MR pages in the xarray mr->page_list, there is no page-info array: nothing to apply, the DKMS package steps aside [%s]\n' "$line" "$text"
		else
			printf 'unaffected: rxe_mr.c:%s keeps the MR pages in the older rxe_map tables, there is no page-info array: nothing to apply, the DKMS package steps aside [%s]\n' "$line" "$text"
		fi
		;;
	*)
		if ((line > 0)); then
			text="rxe_mr.c:$line assigns the MR page-info array from an allocator not known here [$text]"
		fi
		printf 'unknown: %s: read __alloc_mr_page_info() in rxe_mr.c (the rules: classify_why in kmod/rxe-kvfix-lib.sh)\n' "$text"
		return 1
		;;
	esac
}

# The fix is in place: the array comes from a kv* allocator and is freed
# with kvfree(), and no kfree() of it is left.
check_fixed() { # FILE
	local f=$1
	[[ $(classify "$f") == fixed ]] &&
		awk '/^static void free_mr_page_info\(/,/^}/' "$f" | grep -q 'kvfree(mr->page_info)' &&
		! grep -q 'kfree(mr->page_info)' "$f"
}

# Patch series for a classification (empty: none shipped).
series_for_class() { # CLASS
	case $1 in
	affected-kzalloc_objs) echo mainline ;;
	affected-kcalloc) echo stable ;;
	*) echo "" ;;
	esac
}

# rxe_kvfix_meta FIELD [FILE]: the value of FIELD (Name, Version, Release,
# DKMS-Minimum: the oldest DKMS the packages depend on) in
# META, the one file that says rxe-kvfix's version. FILE defaults to the META
# beside this library's kmod/: the checkout's, or the DKMS tree's
# (/usr/src/rxe-kvfix-VERSION, and DKMS's build copy of it). Fails, naming the
# file, when it has no such line.
KVFIX_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# kernel identity, the status record and the build lock, each decided in its own file
# shellcheck source=kmod/rxe-kvfix-kernel.sh
. "$KVFIX_LIB_DIR/rxe-kvfix-kernel.sh"
# shellcheck source=kmod/rxe-kvfix-record.sh
. "$KVFIX_LIB_DIR/rxe-kvfix-record.sh"
# one build at a time: the host-wide build lock
# shellcheck source=kmod/rxe-kvfix-lock.sh
. "$KVFIX_LIB_DIR/rxe-kvfix-lock.sh"
rxe_kvfix_meta() { # FIELD [FILE]
	local field=$1 file=${2:-$KVFIX_LIB_DIR/../META} v
	# the command's copy (/usr/lib/rxe-kvfix/META) has it beside the library
	[[ -n ${2:-} || -r $file || ! -r $KVFIX_LIB_DIR/META ]] || file=$KVFIX_LIB_DIR/META
	v=$(sed -n "s/^$field:[[:space:]]*\([^[:space:]]\{1,\}\)[[:space:]]*\$/\1/p" "$file" 2>/dev/null | head -n1) || true
	if [[ ! -r $file ]]; then
		echo "rxe-kvfix: cannot read $file (META: the package's name and version)" >&2
		return 1
	elif [[ -z $v ]]; then
		echo "rxe-kvfix: no '$field:' line in $file" >&2
		return 1
	fi
	printf '%s\n' "$v"
}

# rxe_kvfix_meta_version [DIR]: the package version, from DIR/META (DIR: a
# checkout, an unpacked tarball or a DKMS tree; default: this library's own).
rxe_kvfix_meta_version() { rxe_kvfix_meta Version "${1:+$1/META}"; }

# rxe_kvfix_versions_agree [DIR]: DIR/dkms.conf's PACKAGE_VERSION (written out
# literally, for dh_dkms and for DKMS, which sources the file from the caller's
# directory) is META's Version. If not, prints on stdout which file says what and
# returns 1. DIR: a checkout, an unpacked tarball or a DKMS tree (default: this
# library's own).
rxe_kvfix_versions_agree() {
	local dir=${1:-$KVFIX_LIB_DIR/..} conf meta
	conf=$(sed -n 's/^PACKAGE_VERSION="\{0,1\}\([^"]*\)"\{0,1\}[[:space:]]*$/\1/p' "$dir/dkms.conf" 2>/dev/null | head -n1)
	meta=$(rxe_kvfix_meta Version "$dir/META" 2>/dev/null) || true
	if [[ $conf == "$meta" && -n $meta ]]; then return 0; fi
	printf '%s/dkms.conf says PACKAGE_VERSION "%s" but %s/META says Version %s\n' "$dir" "$conf" "$dir" "${meta:-(none)}"
	return 1
}

# rxe_kvfix_set_version DIR VERSION: what a release does to the version, in the
# tree DIR: META's Version and dkms.conf's PACKAGE_VERSION both become VERSION.
rxe_kvfix_set_version() {
	sed -i "s/^Version:.*/Version:       $2/" "$1/META" &&
		sed -i "s/^PACKAGE_VERSION=.*/PACKAGE_VERSION=\"$2\"/" "$1/dkms.conf"
}

# --- one pipeline for kmod/rxe-kvfix-prepare (the package's build) and
# patches/validate (a reviewer's tree): the series' patches, applied to a copy of
# drivers/infiniband/sw/rxe, and that copy made a kbuild directory for rdma_rxe.

# rxe_kvfix_series_patches SERIES_DIR: the series' patches in order, one per line
# (nothing when it has none)
rxe_kvfix_series_patches() {
	local p
	for p in "$1"/*.patch; do
		[[ ! -f $p ]] || printf '%s\n' "$p"
	done
}

# rxe_kvfix_apply_patch RXE_DIR PATCH: apply one patch (paths from the kernel's top:
# -p5 reaches the rxe files) to a copy of the rxe source. A dry run comes first, so
# a patch that does not apply leaves RXE_DIR as it was. Prints patch's output (its
# offset and fuzz notes); returns 1 with that output when it does not apply.
rxe_kvfix_apply_patch() {
	local out
	if ! out=$(patch -d "$1" -p5 --dry-run --batch --forward --fuzz=2 <"$2" 2>&1); then
		printf '%s\n' "$out"
		return 1
	fi
	patch -d "$1" -p5 --batch --forward --fuzz=2 --no-backup-if-mismatch <"$2" 2>&1
}

# rxe_kvfix_kbuild_dir RXE_DIR VERSION SERIES SHAPE PROVIDER [FOR]: make RXE_DIR a
# kbuild directory for rdma_rxe that identifies itself as rxe-kvfix (Kbuild.rxe as
# its Kbuild, rxe_kvfix_id.c, and rxe_kvfix_id.h with these values; FOR: a comment)
rxe_kvfix_kbuild_dir() {
	local dir=$1
	cp "$KVFIX_LIB_DIR/Kbuild.rxe" "$dir/Kbuild"
	cp "$KVFIX_LIB_DIR/rxe_kvfix_id.c" "$dir/"
	{
		printf '/* generated by rxe-kvfix%s */\n' "${6:+ for $6}"
		printf '#define RXE_KVFIX_VERSION "%s"\n#define RXE_KVFIX_SERIES "%s"\n' "$2" "$3"
		printf '#define RXE_KVFIX_SHAPE "%s"\n#define RXE_KVFIX_PROVIDER "%s"\n' "$4" "$5"
	} >"$dir/rxe_kvfix_id.h"
}

# rxe_kvfix_deb_inner DEB: the kernel tarball a linux-source .deb holds
# (./usr/src/linux-source-X.Y.tar.*, Ubuntu's in a directory of its own). Returns 1 for a .deb that is not whole (the
# archive is read to its end), 2 for one that holds no such tarball.
rxe_kvfix_deb_inner() {
	local list
	list=$(dpkg-deb --fsys-tarfile "$1" 2>/dev/null | tar -t 2>/dev/null) || return 1
	# Ubuntu's: ./usr/src/linux-source-X.Y.Z/linux-source-X.Y.Z.tar.bz2, and a link to
	# it beside the directory (not the file: looked for first)
	grep -m1 -E '^\./usr/src/linux-source-[0-9.]+/linux-source-[0-9.]+\.tar\.(xz|zst|bz2|gz)$' <<<"$list" ||
		grep -m1 -E '^\./usr/src/linux-source-[0-9.]+\.tar\.(xz|zst|bz2|gz)$' <<<"$list" || return 2
}

# rxe_kvfix_tar_filter NAME: tar's decompression option for NAME
rxe_kvfix_tar_filter() {
	case $1 in *.xz) echo xz ;; *.zst) echo zstd ;; *.bz2) echo bzip2 ;; *) echo gzip ;; esac
}

# rxe_kvfix_rxe_diff [--with-makefile] < PATCH: the parts of a unified diff that touch
# drivers/infiniband/sw/rxe/ (and, with --with-makefile, the top Makefile, whose
# VERSION/PATCHLEVEL/SUBLEVEL a diff over an X.Y tarball moves: Ubuntu's .diff.gz):
# a git-style one (a "diff " line per file decides) or one with "--- "/"+++ " headers
# alone (dpkg-source's format 1.0 .diff.gz). A file created by the diff ("--- /dev/null")
# is decided by its "+++ " line. Hunks are counted, so a removed line that starts with
# "-- " is never taken for a file's header.
# shellcheck disable=SC2120  # --with-makefile: passed by kmod/rxe-kvfix-fetch-debian.sh
rxe_kvfix_rxe_diff() {
	local mk=0
	[[ ${1:-} != --with-makefile ]] || mk=1
	awk -v d="drivers/infiniband/sw/rxe/" -v mk="$mk" '
		function count(s, sign,   a) {
			if (!match(s, sign "[0-9]+(,[0-9]+)?")) return 1
			a = substr(s, RSTART + 1, RLENGTH - 1)
			return index(a, ",") ? substr(a, index(a, ",") + 1) + 0 : 1
		}
		# sel(LINE): the header LINE names a file to keep
		function sel(s,   f, n, p) {
			if (index(s, d)) return 1
			if (!mk) return 0
			n = split(s, f, /[ \t]+/)
			p = (f[1] == "diff") ? f[n] : f[2]
			sub(/^[^\/]*\//, "", p)
			return p == "Makefile"
		}
		ol > 0 || nl > 0 {
			c = substr($0, 1, 1)
			if (c == "-") ol--; else if (c == "+") nl--; else if (c != "\\") { ol--; nl-- }
			if (keep) print
			next
		}
		/^diff / { keep = sel($0); git = 1; pending = "" }
		/^--- / && !git {
			if ($2 == "/dev/null") { keep = 0; pending = $0; next }
			keep = sel($0)
		}
		/^\+\+\+ / {
			if (pending != "") { keep = sel($0); if (keep) print pending; pending = "" }
			git = 0
		}
		/^@@ / { ol = count($0, "-"); nl = count($0, "[+]"); git = 0 }
		keep { print }'
}

# rxe_kvfix_srpm_unpack SRPM DIR: the kernel tarball (linux-*.tar.*) and the
# distribution patches (patch-*.patch) of source RPM SRPM into DIR. On failure
# prints the first error line and returns 1. Through a file, not a pipe: cpio
# stops reading at the archive's trailer, so a write rpm2cpio makes after it
# (rpm 6.1 pads its last block past the trailer) would fail on a closed pipe.
# rpm2cpio of rpm 6.1 names the entries ./linux-..., that of rpm 4.18 linux-...
rxe_kvfix_srpm_unpack() {
	local srpm=$1 dir=$2 rc=0
	mkdir -p "$dir"
	if ! rpm2cpio "$srpm" >"$dir/.srpm.cpio" 2>"$dir/.srpm.err" ||
		! (cd "$dir" && cpio -idm --quiet 'linux-*.tar.*' './linux-*.tar.*' 'patch-*.patch' './patch-*.patch' \
			<"$dir/.srpm.cpio" 2>>"$dir/.srpm.err"); then
		head -n1 "$dir/.srpm.err"
		rc=1
	fi
	rm -f "$dir/.srpm.cpio" "$dir/.srpm.err"
	return "$rc"
}

# rxe_kvfix_srpm_rxe_patches DIR TARGET STRIP: apply the rxe part of each
# DIR/patch-*.patch (Fedora's one distribution patch) to TARGET with patch
# -pSTRIP (1 for a tree's top, 5 for the rxe directory itself). Prints the name
# of each patch applied; returns 1 after printing the name of one that does not
# apply.
rxe_kvfix_srpm_rxe_patches() {
	local dir=$1 target=$2 strip=$3 p diff
	for p in "$dir"/patch-*.patch; do
		[[ -f $p ]] || continue
		diff=$(rxe_kvfix_rxe_diff <"$p")
		[[ -n $diff ]] || continue
		if ! patch -d "$target" -p"$strip" --batch --forward --no-backup-if-mismatch -s <<<"$diff" >/dev/null; then
			basename "$p"
			return 1
		fi
		basename "$p"
	done
}

# rxe_kvfix_extract_rxe SRC DEST [FILTER]: extract the top Makefile and the rxe
# directory (*/Makefile and */drivers/infiniband/sw/rxe/*) of a kernel source
# archive into DEST (made when missing): the one place that does it, for
# kmod/rxe-kvfix-fetch and kmod/rxe-kvfix-prepare. SRC is an archive file (tar
# tells its compression from it), or - for a tar stream on stdin, which FILTER
# decompresses (xz, zstd, bzip2 or gzip: rxe_kvfix_tar_filter gives it from a name).
#   0: extracted; prints the top directory (DEST/linux-..., the one holding drivers/)
#   1: tar failed (a corrupt or truncated archive, a decompressor error, a full
#      disk); prints tar's error text on one line, its lines separated by tabs (the
#      first line: ${out%%$'\t'*}; all of it as prose: ${out//$'\t'/ })
#   2: the archive was read whole but holds no drivers/infiniband/sw/rxe/rxe_mr.c
#      (a headers-only archive, not a corrupt one); prints nothing
rxe_kvfix_extract_rxe() {
	local src=$1 dest=$2 filter=${3:-} opt=() err rc=0 mr
	[[ -z $filter ]] || opt=(--"$filter")
	mkdir -p "$dest" || return 1
	# LC_ALL=C: its messages are matched below, and this library is sourced by
	# callers that do not set it (patches/validate, vmhost)
	err=$(LC_ALL=C tar -x -f "$src" "${opt[@]}" -C "$dest" --wildcards --no-wildcards-match-slash \
		'*/drivers/infiniband/sw/rxe/*' '*/Makefile' 2>&1) || rc=$?
	mr=$(find "$dest" -path '*/drivers/infiniband/sw/rxe/rxe_mr.c' -print -quit)
	if ((rc != 0)); then
		# tar names a pattern nothing matched ("Not found in archive") after reading
		# the archive to its end; a decompressor's or tar's read error is corruption
		if [[ -z $mr ]] && grep -q 'Not found in archive' <<<"$err" &&
			! grep -qiE 'unexpected EOF|not recoverable|corrupt|damaged|(xz|zstd|gzip|bzip2): ' <<<"$err"; then
			return 2
		fi
		printf '%s\n' "${err//$'\n'/$'\t'}"
		return 1
	fi
	[[ -n $mr ]] || return 2
	printf '%s\n' "${mr%/drivers/infiniband/sw/rxe/rxe_mr.c}"
}
