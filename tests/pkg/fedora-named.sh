# shellcheck shell=bash
# fedora-named.sh: step 6 of tests/pkg/fedora-fetch.sh (sourced by it, in the booted
# Fedora-shaped root; uses its MNT W B GH kid KV in_ct in_mnt field t_* and HERE).
# Kernels named as Fedora names them, end to end (simulated: repackaged from the
# root's Debian kernel B, which nothing boots here):
#   - kernel, kernel-core, kernel-modules, kernel-devel V-R.x86_64 for four builds of
#     V (B's upstream version): R = 100.fc44 (the release's first, in "fedora"), 201.fc44
#     and 202.fc44 (older updates), 300.fc44 (the newest); uname -r V-R.x86_64: the
#     modules directory and kernel-devel tree named so, the devel tree's
#     include/config/kernel.release and generated/utsrelease.h saying it, so that
#     kbuild builds against it for that name; signed by the test key (simulated);
#   - a source RPM per build in Fedora's layout: linux-V.tar.xz (trimmed to the top
#     Makefile and the rxe directory, as tests/pkg/fedora-shape.sh makes it) and
#     patch-X.Y-redhat.patch in git format, which also ADDS a file under rxe/;
#   - signed dnf repositories "fedora" (the first build) and "updates", which holds
#     one build at a time: the three kernels come in by dnf5 upgrade as each is
#     published, and "updates" indexes the newest only at the end; every build in
#     Koji's package layout (simulated, 127.0.0.1, the signed copies);
#   - the root's Debian-named kernels set aside, rxe-kvfix-dkms removed; then
#     `dnf5 install rxe-kvfix-dkms`: the three fetch units run one build at a time,
#     the newest's source from "updates", the two older ones' from Koji's layout;
#     `rxe-kvfix status` exits 0, three fixed, each with the archive that served it.
# Cost: the RPMs, made once and kept in <cache>/fedora-named-kernels (about 5 minutes
# on a loaded machine, 114 MB), then signed at each run; three DKMS builds, one at
# a time.
# shellcheck disable=SC2154 # kid, kport: set by fedora-fetch.sh (4c)

NV=$KV
NAMED=(100.fc44 201.fc44 202.fc44 300.fc44)
NDIR=$W/named
NREPO=/srv/rxe-fedora-named
nk() { printf '%s-%s.x86_64\n' "$NV" "$1"; } # uname -r of release R

# named_build R [core-only]: the binary RPMs of build R from B's files, in $NDIR/rpm/RPMS
named_build() {
	local r=$1 k d s mods
	k=$(nk "$r")
	d=$NDIR/root-$r
	mkdir -p "$d/lib/modules/$k"
	cp -a "$MNT/lib/modules/$B"/{vmlinuz,System.map,config,modules.builtin,modules.builtin.modinfo,modules.order} "$d/lib/modules/$k/"
	ln -s "/usr/src/kernels/$k" "$d/lib/modules/$k/build"
	ln -s "/usr/src/kernels/$k" "$d/lib/modules/$k/source"
	# kernel-modules: rdma_rxe and what it needs (all the build and modinfo read)
	mods=$(in_ct modprobe -S "$B" --show-depends rdma_rxe | awk '$1 == "insmod" {print $2}')
	while read -r m; do
		[[ -n $m ]] || continue
		mkdir -p "$d/lib/modules/$k/$(dirname "${m#/lib/modules/"$B"/}")"
		cp -a "$MNT$m" "$d/lib/modules/$k/${m#/lib/modules/"$B"/}"
	done <<<"$mods"
	if [[ ${2:-} != core-only ]]; then
		mkdir -p "$d/usr/src/kernels"
		cp -a "$MNT/usr/src/kernels/$B" "$d/usr/src/kernels/$k"
		printf '%s\n' "$k" >"$d/usr/src/kernels/$k/include/config/kernel.release"
		printf '#define UTS_RELEASE "%s"\n' "$k" >"$d/usr/src/kernels/$k/include/generated/utsrelease.h"
	fi
	s=$NDIR/rpm/SPECS/kernel-$r.spec
	mkdir -p "$NDIR/rpm/SPECS"
	{
		printf 'Name: kernel\nVersion: %s\nRelease: %s\nSummary: Fedora-shaped (simulated): Debian kernel %s repackaged as Fedora kernel %s\n' "$NV" "$r" "$B" "$k"
		printf 'License: GPL-2.0-only\nExclusiveArch: x86_64\nAutoReqProv: no\nRequires: kernel-core = %%{version}-%%{release}\nRequires: kernel-modules = %%{version}-%%{release}\n'
		printf '%%description\nrxe-kvfix test package (simulated).\n'
		printf '%%package core\nSummary: the kernel %s (simulated)\nProvides: installonlypkg(kernel)\n%%description core\nsimulated\n' "$k"
		printf '%%package modules\nSummary: modules of %s (simulated)\nProvides: installonlypkg(kernel-module)\nRequires: kernel-core = %%{version}-%%{release}\n%%description modules\nsimulated\n' "$k"
		[[ ${2:-} == core-only ]] ||
			printf '%%package devel\nSummary: kernel-devel of %s (simulated)\nProvides: installonlypkg(kernel)\nAutoReqProv: no\n%%description devel\nsimulated\n' "$k"
		printf '%%install\ncp -a %s/. %%{buildroot}/\n' "$d"
		printf '%%posttrans core\n/usr/bin/kernel-install add %s /lib/modules/%s/vmlinuz || exit $?\n' "$k" "$k"
		printf '%%preun core\n/usr/bin/kernel-install remove %s || exit $?\n' "$k"
		printf '%%files\n%%files core\n/lib/modules/%s/vmlinuz\n/lib/modules/%s/System.map\n/lib/modules/%s/config\n/lib/modules/%s/modules.*\n/lib/modules/%s/build\n/lib/modules/%s/source\n' "$k" "$k" "$k" "$k" "$k" "$k"
		printf '%%files modules\n/lib/modules/%s/kernel\n' "$k"
		[[ ${2:-} == core-only ]] || printf '%%files devel\n/usr/src/kernels/%s\n' "$k"
	} >"$s"
	rpmbuild -bb --target x86_64 --define "_topdir $NDIR/rpm" --define '_build_id_links none' --define '__os_install_post %{nil}' \
		--define 'debug_package %{nil}' --define '_binary_payload w1.zstdio' --define '__arch_install_post %{nil}' \
		"$s" >"$NDIR/rpmbuild-$r.log" 2>&1 || {
		tail -n2 "$NDIR/rpmbuild-$r.log"
		return 1
	}
	rm -rf "$d"
}

# named_srpm R: kernel-V-R.src.rpm in Fedora's layout from B's test source RPM
# ($W/good.src.rpm): its Release R, its redhat patch in git format also adding
# drivers/infiniband/sw/rxe/rxe_fedora_named.h (kept and built by rxe-kvfix)
named_srpm() {
	local r=$1 x=$NDIR/srpm-$1 p
	mkdir -p "$x/SOURCES" "$x/SPECS"
	(cd "$x/SOURCES" && rpm2cpio "$W/good.src.rpm" | cpio -idm --quiet) || return 1
	mv "$x/SOURCES/kernel.spec" "$x/SPECS/"
	sed -i "s/^Release: .*/Release: $r/" "$x/SPECS/kernel.spec"
	p=$(find "$x/SOURCES" -name 'patch-*-redhat.patch' -print -quit)
	printf '%s\n' "diff --git a/drivers/infiniband/sw/rxe/rxe_fedora_named.h b/drivers/infiniband/sw/rxe/rxe_fedora_named.h" \
		'new file mode 100644' 'index 0000000..1111111' '--- /dev/null' '+++ b/drivers/infiniband/sw/rxe/rxe_fedora_named.h' \
		'@@ -0,0 +1,2 @@' "+/* Fedora-shaped (simulated): added by the redhat patch of kernel-$NV-$r */" \
		"+#define RXE_FEDORA_NAMED \"$r\"" >>"$p"
	rpmbuild -bs --define "_topdir $x" "$x/SPECS/kernel.spec" >"$x/rpmbuild.log" 2>&1 || {
		tail -n1 "$x/rpmbuild.log"
		return 1
	}
	cp "$x/SRPMS/kernel-$NV-$r.src.rpm" "$NDIR/rpm/SRPMS/"
}

# named_publish REPO R...: REPO (fedora, updates) indexes the builds R... only
named_publish() {
	local repo=$1 r
	shift
	rm -rf "${MNT:?}$NREPO/$repo"
	mkdir -p "$MNT$NREPO/$repo/x86_64" "$MNT$NREPO/$repo/source"
	for r in "$@"; do
		cp "$NDIR"/rpm/RPMS/x86_64/kernel*-"$NV-$r".x86_64.rpm "$MNT$NREPO/$repo/x86_64/"
		cp "$NDIR/rpm/SRPMS/kernel-$NV-$r.src.rpm" "$MNT$NREPO/$repo/source/"
	done
	in_mnt createrepo_c -q "$NREPO/$repo/x86_64" && in_mnt createrepo_c -q "$NREPO/$repo/source"
}

echo "--- Fedora-named kernels (simulated: Debian kernel $B repackaged as Fedora names its builds)"
t0=$SECONDS
# B's module index (its stand-in package's kernel-install remove, 5., dropped it)
in_ct depmod "$B" >/dev/null 2>&1 || true
t_start "$F: Fedora-named kernels $(nk 100.fc44) .. $(nk 300.fc44): kernel-core, kernel-modules, kernel-devel and source RPMs (a git-format redhat patch adding a file under rxe/) made from $B, signed (test key, simulated)"
# made once and kept, unsigned (the test key is made afresh by each run), keyed by
# their inputs: B's Debian packages, the source RPM they start from, this code
NCACHE=${RXE_CACHE:-/var/cache/rxe-kvfix}/fedora-named-kernels
nkey=$({
	declare -f named_build named_srpm
	printf '%s\n' "${NAMED[@]}" "$B" "$F"
	dpkg-query --admindir="$MNT/var/lib/dpkg" -W -f '${Package} ${Version}\n' "linux-headers-$B" "linux-image-$B*" 2>/dev/null
	sha256sum <"$W/good.src.rpm"
} | sha256sum | cut -c1-12)
mkdir -p "$NDIR/rpm/SRPMS"
ok=1 cached=''
if [[ -d $NCACHE/$nkey/RPMS ]]; then
	cp -a "$NCACHE/$nkey/." "$NDIR/rpm/" && cached=" (kept in $NCACHE/$nkey)" || ok=0
else
	for r in "${NAMED[@]}"; do
		if [[ $r == "${NAMED[0]}" ]]; then named_build "$r" core-only || ok=0; else named_build "$r" || ok=0; fi
		named_srpm "$r" || ok=0
	done
	# kept under a name of this run's own, renamed into place whole (best effort)
	if ((ok)) && mkdir -p "$NCACHE/$nkey.$$" && cp -a "$NDIR/rpm/RPMS" "$NDIR/rpm/SRPMS" "$NCACHE/$nkey.$$/"; then
		[[ -d $NCACHE/$nkey ]] || mv -T "$NCACHE/$nkey.$$" "$NCACHE/$nkey" 2>/dev/null || true
	fi
	rm -rf "${NCACHE:?}/$nkey.$$"
fi
if ((ok)) && rpmsign --define "__gpg $(command -v gpg)" --define "_gpg_path $GH" --define '_gpg_name rxe-kvfix test key' \
	--addsign "$NDIR"/rpm/RPMS/x86_64/*.rpm "$NDIR"/rpm/SRPMS/*.src.rpm </dev/null >"$NDIR/sign.log" 2>&1; then
	t_pass
	echo "     $(find "$NDIR/rpm" -name '*.rpm' | wc -l) RPMs, $(du -sm "$NDIR/rpm/RPMS" | cut -f1) MB, $((SECONDS - t0)) s$cached"
else
	t_fail "$(tail -n2 "$NDIR"/rpmbuild-*.log "$NDIR/sign.log" 2>/dev/null | tr '\n' ' ' | cut -c1-400)"
fi
# Koji's package layout: every build, each under the key that signed it
for r in "${NAMED[@]}"; do
	mkdir -p "$W/koji/kojifiles/packages/kernel/$NV/$r/data/signed/$kid/src"
	cp "$NDIR/rpm/SRPMS/kernel-$NV-$r.src.rpm" "$W/koji/kojifiles/packages/kernel/$NV/$r/data/signed/$kid/src/"
done
mkdir -p "$MNT/etc/pki/rpm-gpg" "$MNT/etc/koji.conf.d"
gpg --batch -q --homedir "$GH" --armor --export >"$MNT/etc/pki/rpm-gpg/RPM-GPG-KEY-rxe-test"
printf "[koji]\n; rxe-kvfix test: Koji's package layout, simulated (a local server)\ntopurl = http://127.0.0.1:%s/kojifiles\n" "$kport" >"$MNT/etc/koji.conf.d/rxe-test.conf"
rm -f "$MNT/etc/yum.repos.d/rxe-test.repo"
for repo in fedora updates; do
	printf '[%s]\nname=Fedora-shaped %s (simulated)\nbaseurl=file://%s/%s/x86_64\ngpgcheck=1\ngpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-rxe-test\n\n[%s-source]\nname=Fedora-shaped %s - Source (simulated)\nbaseurl=file://%s/%s/source\ngpgcheck=1\ngpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-rxe-test\nenabled=0\n' \
		"$repo" "$repo" "$NREPO" "$repo" "$repo" "$repo" "$NREPO" "$repo"
done >"$MNT/etc/yum.repos.d/rxe-fedora-named.repo"

# the root's Debian-named kernels set aside, rxe-kvfix-dkms removed: a host with
# Fedora's kernels only
t_start "$F: rxe-kvfix-dkms removed, the Debian-named kernels set aside; dnf5 upgrade as each update is published: $(nk 201.fc44), $(nk 202.fc44), $(nk 300.fc44) installed (installonly); \"updates\" then indexes $NV-300.fc44 only"
in_ct dnf5 -y -q remove rxe-kvfix-dkms >"$NDIR/remove.log" 2>&1 || true
mkdir -p "$MNT/var/lib/rxe-test-aside"
for k in "$MNT"/lib/modules/*; do
	k=${k##*/}
	[[ $k != *.fc44.x86_64 ]] || continue
	mv "$MNT/lib/modules/$k" "$MNT/var/lib/rxe-test-aside/modules-$k"
	[[ ! -d $MNT/usr/src/kernels/$k ]] || mv "$MNT/usr/src/kernels/$k" "$MNT/var/lib/rxe-test-aside/devel-$k"
	rm -f "$MNT/var/lib/rxe-kvfix/status/$k"
done
# (and the stand-in kernel-modules packages of 1.-3., which own their files)
mapfile -t old < <(in_ct rpm -qa 'kernel-modules*' 2>/dev/null)
((${#old[@]} == 0)) || in_ct rpm -e --justdb --noscripts --nodeps "${old[@]}" >/dev/null 2>&1 || true
named_publish fedora 100.fc44
ok=1
for r in 201.fc44 202.fc44 300.fc44; do
	named_publish updates "$r" &&
		in_ct dnf5 -y -q --refresh install "kernel-$NV-$r" "kernel-devel-$NV-$r" >>"$NDIR/install.log" 2>&1 || ok=0
done
inst=$(in_ct rpm -q kernel-core kernel-devel 2>&1 | tr '\n' ' ')
if ((ok)) && [[ $(in_ct rpm -q kernel-core | grep -c "^kernel-core-$NV-") == 3 && $(in_ct rpm -q kernel-devel | grep -c "^kernel-devel-$NV-") == 3 ]] &&
	[[ $(find "$MNT$NREPO/updates/source" -name '*.src.rpm' -printf '%f ') == "kernel-$NV-300.fc44.src.rpm " ]]; then
	t_pass
	echo "     installed: $inst"
else
	t_fail "$inst: $(tail -n3 "$NDIR/install.log" | tr '\n' ' ' | cut -c1-400)"
fi

# dnf5 install rxe-kvfix-dkms: %post defers the three (inside the transaction), the
# fetch units run after it
t_start "$F: dnf5 install rxe-kvfix-dkms with three Fedora-named kernels: the fetch units build them one at a time after the transaction; rxe-kvfix status exits 0, three fixed, each with the archive that served its source (updates: repository; the older two: koji)"
t1=$SECONDS rc=0
out=$(in_ct sh -c 'dnf5 -y install /root/rpms/rxe-kvfix-dkms-*.noarch.rpm' 2>&1) || rc=$?
for r in 201.fc44 202.fc44 300.fc44; do wait_unit "$(in_ct systemd-escape --template=rxe-kvfix-fetch@.service "$(nk "$r")")" 0; done
st_rc=0
st=$(in_ct rxe-kvfix status 2>&1) || st_rc=$?
sj=$(in_ct rxe-kvfix status --json 2>&1 || true)
arch() { jq -r --arg k "$(nk "$1")" '.kernels[] | select(.kernel == $k) | "\(.verdict) \(.source.archive)"' <<<"$sj" 2>/dev/null; }
# the builds in the order they ran: each DKMS make.log's start (its header's date)
# and end (its mtime); one at a time when no build starts before the previous ended
order=$(for r in 201.fc44 202.fc44 300.fc44; do
	l=$(find "$MNT/var/lib/dkms/rxe-kvfix" -path "*/$(nk "$r")/*/log/make.log" 2>/dev/null | head -n1)
	[[ -n $l ]] || continue
	printf '%s %s %s\n' "$(date -d "$(sed -n '2p' "$l")" +%s 2>/dev/null || echo 0)" "$(stat -c %Y "$l")" "$(nk "$r")"
done | sort -n)
serial=$(awk 'NR > 1 && $1 < end {bad = 1} {end = $2} END {print (NR == 3 && !bad) ? "yes" : "no"}' <<<"$order")
if ((rc == 0 && st_rc == 0)) && [[ $(arch 300.fc44) == "fixed repository" && $(arch 201.fc44) == "fixed koji" && $(arch 202.fc44) == "fixed koji" && $serial == yes ]] &&
	[[ $(tar -tJf "$MNT/var/cache/rxe-kvfix/sources/kernel-$NV-300.fc44.rxe.tar.xz" 2>/dev/null) == *rxe/rxe_fedora_named.h* ]] &&
	[[ $(in_ct modinfo -k "$(nk 300.fc44)" -F vermagic rdma_rxe 2>/dev/null) == "$(nk 300.fc44) "* ]]; then
	t_pass
	echo "     $((SECONDS - t1)) s from dnf5 install to the three modules; the builds in order (start, end):"
	while read -r s e k; do echo "       $(date -u -d "@$s" +%T) .. $(date -u -d "@$e" +%T) $k"; done <<<"$order"
	in_ct journalctl -q -o short-iso -u 'rxe-kvfix-fetch@*' 2>/dev/null | grep -E 'waiting for the build|built and installed' | cut -c1-220 | sed 's/^/     journal: /'
	while IFS= read -r l; do echo "     status: $l"; done <<<"$st"
	echo "     vermagic: $(in_ct modinfo -k "$(nk 300.fc44)" -F vermagic rdma_rxe 2>/dev/null)"
else
	t_fail "dnf5 exit $rc ($(tail -n2 <<<"$out" | tr '\n' ' ' | cut -c1-200)), vermagic '$(in_ct modinfo -k "$(nk 300.fc44)" -F vermagic rdma_rxe 2>&1 | head -n2 | tr '\n' ' ')', kept: $(tar -tJf "$MNT/var/cache/rxe-kvfix/sources/kernel-$NV-300.fc44.rxe.tar.xz" 2>&1 | grep -c 'rxe_fedora_named' || true) added file(s), status exit $st_rc, one at a time: $serial ($(tr '\n' ' ' <<<"$order")); $(for r in 201.fc44 202.fc44 300.fc44; do printf '%s: %s; ' "$r" "$(arch "$r")"; done) status: $(tr '\n' ' ' <<<"$st" | cut -c1-700)"
fi
echo "--- Fedora-named kernels: $((SECONDS - t0)) s"
