# shellcheck shell=bash
# rxe-kvfix-lib.sh: content checks shared by kmod/rxe-kvfix-prepare and
# patches/validate, and the reader of META. Sourced, not executed.

# Prints one of the classification tokens for an rxe_mr.c.
classify() { # FILE
	local f=$1 alloc
	alloc=$(awk '/^static int __alloc_mr_page_info\(/,/^}/' "$f" | grep -E 'mr->page_info[[:space:]]*=' || true)
	if [[ -n $alloc ]]; then
		if grep -qE '\bkv(calloc|zalloc_objs|malloc_objs|zalloc|malloc_array|malloc)\b' <<<"$alloc"; then
			echo fixed
		elif grep -qE '\bkzalloc_objs\b' <<<"$alloc"; then
			echo affected-kzalloc_objs
		elif grep -qE '\bkcalloc\b' <<<"$alloc"; then
			echo affected-kcalloc
		elif grep -qE '\bkmalloc_array\b' <<<"$alloc"; then
			echo affected-kmalloc_array
		else
			echo unknown
		fi
	elif grep -qE 'xa_(load|store)\(&mr->page_list' "$f"; then
		echo unaffected
	elif grep -qE 'mr->map\[|rxe_mr_alloc_map|struct rxe_map\b' "$f"; then
		echo unaffected
	else
		echo unknown
	fi
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

# rxe_kvfix_meta FIELD [FILE]: the value of FIELD (Name, Version, Release) in
# META, the one file that says rxe-kvfix's version. FILE defaults to the META
# beside this library's kmod/: the checkout's, or the DKMS tree's
# (/usr/src/rxe-kvfix-VERSION, and DKMS's build copy of it). Fails, naming the
# file, when it has no such line.
RXE_KVFIX_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rxe_kvfix_meta() { # FIELD [FILE]
	local field=$1 file=${2:-$RXE_KVFIX_LIB_DIR/../META} v
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
