# shellcheck shell=bash
# tests/hostlib.sh: host-side helpers only the tests use, on top of vmhost/lib.sh
# (source that first: these call rxe_chroot_run and rxe_cache_dir).
#   rxe_chroot_apt_install DIR WHAT PKG...
#                         apt-get update and install PKG (no recommends) into the
#                         root at DIR (an overlay: it is written); log in
#                         DIR/root/apt.log; on failure its tail and one line naming
#                         WHAT on stderr, status 1
#   rxe_kernel_tree LOWER XY VERSION
#                         the full kernel tree of a build root's linux-source, cached
#                         (below)

rxe_chroot_apt_install() {
	local dir=$1 what=$2
	shift 2
	# shellcheck disable=SC2016  # $0 and $@ belong to the chrooted sh
	if ! rxe_chroot_run "$dir" sh -c 'apt-get -q update && apt-get -q -y --no-install-recommends install "$@"' sh "$@" \
		>"$dir/root/apt.log" 2>&1; then
		tail -n 5 "$dir/root/apt.log" >&2
		echo "installing $what ($*) into $dir failed (above; log $dir/root/apt.log)" >&2
		return 1
	fi
}

# rxe_kernel_tree LOWER XY VERSION: the full tree of build root LOWER's
# /usr/src/linux-source-XY.tar.xz (Debian package version VERSION), extracted once
# into <cache>/trees and reused: a test input like the build roots (1.6 GB; the
# validate tests and the debug kernel read it, never write it). Prints its path;
# "extracted in N s" or "cached" on stderr.
rxe_kernel_tree() {
	local lower=$1 xy=$2 ver=$3 dir tmp lk t0=$SECONDS extracted=0
	dir=$(rxe_cache_dir)/trees/linux-source-${xy}_$ver
	if [[ ! -f $dir/.complete ]]; then
		mkdir -p "$(dirname "$dir")"
		# one extraction at a time (the kmod and vm stages may want the same tree)
		exec {lk}>"$dir.lock"
		flock "$lk"
		if [[ ! -f $dir/.complete ]]; then
			# what an extraction killed before it finished left behind (1.6 GB each):
			# with the lock held, nobody is extracting into it
			rm -rf "$dir".tmp.*
			tmp=$(mktemp -d "$dir.tmp.XXXXXX")
			if ! tar -xf "$lower/usr/src/linux-source-$xy.tar.xz" -C "$tmp" --strip-components=1; then
				rm -rf "$tmp"
				exec {lk}>&-
				return 1
			fi
			touch "$tmp/.complete"
			rm -rf "$dir"
			mv -T "$tmp" "$dir"
			echo "     linux-source-$xy $ver extracted into $dir in $((SECONDS - t0)) s" >&2
			extracted=1
		fi
		exec {lk}>&-
	fi
	((extracted)) || echo "     linux-source-$xy $ver: the tree cached in $dir" >&2
	printf '%s\n' "$dir"
}
