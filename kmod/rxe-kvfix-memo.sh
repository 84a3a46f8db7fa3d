# shellcheck shell=bash
# rxe-kvfix-memo.sh: the memo of kmod/rxe-kvfix-prepare (sourced by it): the rxe part
# of a large source archive, kept between builds. Uses prepare's CACHE, WORK and say.
# --- the memo: what one extraction gave, kept for the next build -----------------
# Taking the rxe directory out of a kernel source archive reads the whole archive
# (linux-source-7.2.tar.xz: 150 MB of xz, about 13 s of one core here; a source RPM
# is unpacked first as well). An upgrade, reinstall or downgrade of this package, and
# the boot repair, rebuild every kernel from the same archives: MEMO keeps the rxe
# directory and the top Makefile a provider got from an archive (with the
# distribution's rxe patches for a source RPM), keyed by the archive's path, size,
# mtime and inode. A replaced, touched or removed archive is a miss, and its entry is
# dropped; erasing or purging the package removes MEMO. Best effort: a MEMO that
# cannot be written is only not used.
MEMO=$CACHE/.memo
memo_key() { # ARCHIVE -> the key of its current state (empty if it cannot be read)
	local st
	st=$(stat -L -c '%s %Y %i' -- "$1" 2>/dev/null) || return 0
	printf '%s %s\n' "$(realpath -- "$1")" "$st" | sha256sum | cut -c1-24
}
memo_prune() { # drop the entries whose archive changed or went away
	local e src
	for e in "$MEMO"/*/; do
		[[ -f $e/archive ]] || continue
		src=$(<"$e/archive")
		[[ $(memo_key "$src") == "$(basename "$e")" ]] || rm -rf "$e"
	done 2>/dev/null || true
}
memo_get() { # ARCHIVE -> 0 with $WORK/rxe, $WORK/memo.version and $WORK/memo.applied restored
	local key
	key=$(memo_key "$1")
	[[ -n $key && -f $MEMO/$key/rxe.tar && -f $MEMO/$key/version ]] || return 1
	mkdir -p "$WORK/rxe"
	if ! tar -xf "$MEMO/$key/rxe.tar" -C "$WORK/rxe" 2>/dev/null || [[ ! -f $WORK/rxe/rxe_mr.c ]]; then
		rm -rf "$WORK/rxe"
		return 1
	fi
	cp "$MEMO/$key/version" "$WORK/memo.version"
	cp "$MEMO/$key/applied" "$WORK/memo.applied" 2>/dev/null || : >"$WORK/memo.applied"
	say "rxe source of $1 taken from $MEMO/$key (kept by an earlier build; the archive unchanged)"
}
# MEMO_PART: the entry this process is writing, under a name of its own (mktemp -d
# beside the entries; hidden, so no glob here reads it) and renamed into place whole;
# prepare's cleanup removes it when the process ends before that
MEMO_PART=''
memo_put() { # ARCHIVE VERSION [APPLIED...]: keep $WORK/rxe as it is now
	local src=$1 v=$2 key e
	shift 2
	key=$(memo_key "$src")
	[[ -n $key ]] || return 0
	e=$MEMO/$key
	{
		mkdir -p "$MEMO" && MEMO_PART=$(mktemp -d "$MEMO/.$key.XXXXXX") && chmod 0755 "$MEMO_PART" &&
			tar -cf "$MEMO_PART/rxe.tar" -C "$WORK/rxe" . &&
			printf '%s\n' "$(realpath -- "$src")" >"$MEMO_PART/archive" &&
			printf '%s\n' "$v" >"$MEMO_PART/version" &&
			printf '%s\n' "$@" >"$MEMO_PART/applied" &&
			rm -rf "$e" && mv -T "$MEMO_PART" "$e" && MEMO_PART=
	} 2>/dev/null || true
	# not renamed (another process put the same entry first, or a write failed): dropped
	[[ -z $MEMO_PART ]] || rm -rf "$MEMO_PART" 2>/dev/null || true
	MEMO_PART=''
}
