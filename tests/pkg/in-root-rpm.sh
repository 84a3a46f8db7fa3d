#!/usr/bin/env bash
# in-root-rpm.sh: rxe-kvfix's RPMs installed with rpm in a Fedora-shaped root
# (simulated: Debian kernel, DKMS's Fedora code path, Fedora's file layout; made
# by tests/pkg/fedora-shape.sh), inside a chroot of it, offline. One step a call:
#
#   in-root-rpm.sh SRC STEP [ARGS]
#     install RPMDIR REL:EXPECT...  the base (below), a kernel-modules package for
#                                   the first kernel, rpm -i rxe-kvfix-dkms rxe-verify:
#                                   %post builds through DKMS for every kernel
#     kernel-upgrade REL            kernel-devel of REL moved in place (as dnf does),
#                                   `kernel-install add`: Fedora's dkms plugin
#     lifecycle FAMILY BASEDIR BUMPDIR RELDIR REL:EXPECT...
#                                   the packages' life after the install, FAMILY rpm
#                                   (rpm -U, rpm --reinstall, rpm -U --oldpackage) or
#                                   dnf (dnf5 against the repository BASEDIR BUMPDIR
#                                   RELDIR were published to: install, upgrade,
#                                   reinstall, downgrade, remove): rxe-kvfix-dkms one
#                                   Version higher (BUMPDIR), then one Release higher
#                                   (RELDIR), reinstalled, downgraded to BASEDIR's;
#                                   tests/pkg/lifecycle-lib.sh, a line a step
#     erase REL:EXPECT...           rpm -e both; nothing of ours left
#     negative RPMDIR REL           no source RPM: rpm -i succeeds, DKMS steps aside with
#                                   the dnf remedy, the in-tree module stays; rpm -e
#
# Dependencies: the root's rpmdb is empty (its software came from dpkg), so a
# base package "fedora-shaped-base" provides exactly the capabilities our RPMs
# require, each one checked here against what the root really has (a command,
# a file, a library soname and its symbol version); rpm then checks
# dependencies as on Fedora: nothing is installed with --nodeps.
# Results: testlib lines (suite pkg-fedora), TSV in $RXE_RESULTS.
set -euo pipefail

usage() { sed -n '/^#   in-root-rpm.sh/,/^#     negative/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
[[ ${1:-} != -h && ${1:-} != --help ]] || {
	usage
	exit 0
}
(($# >= 2)) || {
	usage >&2
	exit 2
}
SRC=$1 STEP=$2
shift 2
# shellcheck source=tests/testlib.sh
. "$SRC/tests/testlib.sh"
# shellcheck source=tests/pkg/lifecycle-lib.sh
. "$SRC/tests/pkg/lifecycle-lib.sh"
t_suite pkg-fedora
M=rxe-kvfix
F="Fedora-shaped"
LOG=/tmp/in-root-rpm.log
CACHE=/var/cache/rxe-kvfix/sources
ARCH=$(uname -m)

resolved() { modinfo -k "$1" -n rdma_rxe 2>/dev/null; }
intree() { find "/lib/modules/$1/kernel/drivers/infiniband/sw/rxe" -name 'rdma_rxe.ko*' 2>/dev/null; }
archived() { find "/var/lib/dkms/$M/original_module/$1" -name 'rdma_rxe.ko*' ! -name '*.origin' 2>/dev/null; }
ours() { find "/lib/modules/$1/extra" "/lib/modules/$1/updates" -name 'rdma_rxe.ko*' 2>/dev/null; }
rpmver() { rpm -q --qf '%{VERSION}' "$1" 2>/dev/null; }
# run CMD...: CMD's output appended to LOG and kept in OUT
run() {
	local rc=0
	OUT=$("$@" 2>&1) || rc=$?
	printf '+ %s\n%s\n' "$*" "$OUT" >>"$LOG"
	return "$rc"
}
OUT=''
logtail() { tail -n 3 <<<"$OUT" | tr '\n' ' ' | cut -c1-300; }

# check_built REL VER: REL has our module VER under /extra, found first by
# modinfo and modprobe, built from the SRPM provider, the in-tree module archived
check_built() {
	local k=$1 ver=$2 p dep src prov
	t_start "$F: $k: DKMS installed rdma_rxe $ver under /extra; modinfo -n and modprobe --show-depends resolve it"
	p=$(resolved "$k")
	dep=$(modprobe -S "$k" --show-depends rdma_rxe 2>&1 | tail -n1)
	if [[ $p == "/lib/modules/$k/extra/rdma_rxe.ko"* && $dep == "insmod $p"* && $(modinfo -F version "$p") == "$ver-rxe-kvfix" ]]; then
		t_pass
		echo "     $dep"
	else
		t_fail "modinfo -n '$p', modprobe: '$dep', version '$(modinfo -F version "$p" 2>&1)'; dkms: $(dkms status "$M" 2>&1 | tr '\n' ' ')"
		return 0
	fi
	t_start "$F: $k: built from the Fedora kernel source RPM (provenance: provider=srpm, the rxe part of patch-X.Y-redhat.patch applied)"
	src=/var/lib/dkms/$M/$ver/$k/$ARCH/log/rxe-kvfix-source.txt
	prov=$(cat "$src" 2>/dev/null || true)
	if [[ $prov == *"provider=srpm"* && $prov == *"source=$CACHE/kernel-"*".src.rpm"* ]] &&
		grep -q 'applied the rxe part of distribution patch patch-' "/var/lib/dkms/$M/$ver/$k/$ARCH/log/make.log" 2>/dev/null; then
		t_pass
		echo "     $prov"
	else
		t_fail "provenance $src: '${prov:-missing}'"
	fi
	t_start "$F: $k: the in-tree rdma_rxe archived in /var/lib/dkms/$M/original_module (DKMS's Fedora path)"
	if [[ -z $(intree "$k") && -n $(archived "$k") ]]; then
		t_pass
		echo "     $(archived "$k")"
	else
		t_fail "in-tree: '$(intree "$k")', archived: '$(archived "$k")'"
	fi
}

# check_skipped REL: REL (unaffected) got nothing of ours; its own module resolves
check_skipped() {
	local k=$1 p
	t_start "$F: $k: unaffected, skipped by %post without failing the transaction; its own rdma_rxe resolves"
	p=$(resolved "$k")
	if [[ -n $(ours "$k") || $p != "/lib/modules/$k/kernel/"* ]]; then
		t_fail "ours: '$(ours "$k")', modinfo -n '$p'"
	elif ! grep -q "rxe-kvfix-dkms: $k does not need rxe-kvfix" <<<"$POST"; then
		t_fail "%post did not report the skip of $k: $(tr '\n' ' ' <<<"$POST" | cut -c1-300)"
	else
		t_pass
		grep "rxe-kvfix-dkms: $k" <<<"$POST" | sed 's/^/     /'
	fi
}

affected() { # REL:EXPECT...: how many need the fix (DKMS builds each once)
	local n=0 spec
	for spec; do [[ ${spec#*:} != affected-* ]] || n=$((n + 1)); done
	echo "$n"
}

check_kernels() { # VER REL:EXPECT...
	local ver=$1 spec
	shift
	for spec in "$@"; do
		case ${spec#*:} in
		affected-*) check_built "${spec%%:*}" "$ver" ;;
		*) check_skipped "${spec%%:*}" ;;
		esac
	done
}

# the base: Provides for every requirement of our RPMs, each checked here; dkms at
# the version of the root's own DKMS (BASE_DKMS: another, for the floor's test), so
# that rpm, not this function, judges a versioned requirement
make_base() {
	local rpms=("$@") r cap ok prov=() lib node d dv
	while read -r r; do
		cap=${r%% *}
		ok=0
		case $cap in
		rpmlib\(*) continue ;; # rpm itself
		config\(*) continue ;; # the package's own
		/*) [[ -e $cap ]] && ok=1 ;;
		rtld\(GNU_HASH\)) [[ -e /lib64/ld-linux-x86-64.so.2 ]] && ok=1 ;;
		lib*.so*)
			lib=${cap%%(*}
			node=$(sed -n 's/^[^(]*()(64bit)$//p; s/^[^(]*(\([^)]*\))(64bit)$/\1/p' <<<"$cap")
			d=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
			[[ -n $d ]] && { [[ -z $node ]] || grep -qaF "$node" "$d"; } && ok=1
			;;
		kernel-devel) compgen -G '/usr/src/kernels/*/Makefile' >/dev/null && ok=1 ;;
		rdma-core) command -v rdma >/dev/null && [[ -d /etc/rdma || -e /usr/sbin/rdma-ndd || -e /usr/bin/rdma ]] && ok=1 ;;
		dkms)
			dv=${BASE_DKMS:-$(dpkg-query -W -f '${Version}' dkms 2>/dev/null | sed 's/^[0-9]*://; s/-[^-]*$//')}
			command -v dkms >/dev/null && [[ -n $dv ]] && ok=1 && r="dkms = $dv"
			;;
		xz | cpio | make | patch) command -v "$cap" >/dev/null && ok=1 ;;
		systemd) [[ -x /usr/bin/systemctl && -d /usr/lib/systemd/system ]] && ok=1 ;; # %systemd_requires
		*) ;;
		esac
		((ok)) || {
			echo "the root has nothing that provides '$r'"
			return 1
		}
		prov+=("$r")
	done < <(rpm -qpR "${rpms[@]}" | sort -u)
	mkdir -p /tmp/base/SPECS
	{
		printf 'Name: fedora-shaped-base\nVersion: 44\nRelease: 1\nSummary: %s\nLicense: MIT\nBuildArch: noarch\n' \
			"capabilities of the Fedora-shaped root, provided by its Debian packages"
		printf 'Provides: %s\n' "${prov[@]}"
		printf '%%description\nWhat rpm needs to know of the Debian packages in this root.\n%%files\n'
	} >/tmp/base/SPECS/base.spec
	run rpmbuild -bb --define '_topdir /tmp/base' /tmp/base/SPECS/base.spec &&
		run rpm -i /tmp/base/RPMS/noarch/fedora-shaped-base-44-1.noarch.rpm &&
		echo "${#prov[@]} capabilities (symbol versions not shown): $(printf '%s\n' "${prov[@]}" | sed -E 's/\([^)]*\)\(64bit\)$//; s/\(\)$//' | sort -u | tr '\n' ' ')"
}

# kernel-modules for REL, owning the in-tree rdma_rxe as Fedora's kernel-modules does
make_kernel_modules() {
	local k=$1 f
	f=$(intree "$k")
	[[ -n $f ]] || {
		echo "no in-tree rdma_rxe for $k"
		return 1
	}
	mkdir -p /tmp/km/SPECS
	cat >/tmp/km/SPECS/km.spec <<EOF
Name: kernel-modules
Version: ${k%%+*}
Release: 200.fc44
Summary: $F: the in-tree rdma_rxe of $k, owned as Fedora's kernel-modules owns it
License: GPL-2.0-only
%description
Owns $f (the file the root already has).
%install
mkdir -p %{buildroot}$(dirname "$f")
cp -a $f %{buildroot}$f
%files
$f
EOF
	run rpmbuild -bb --define '_topdir /tmp/km' --define '__os_install_post %{nil}' --define 'debug_package %{nil}' /tmp/km/SPECS/km.spec &&
		run rpm -i --replacefiles /tmp/km/RPMS/*/kernel-modules-*.rpm
}

# left_after_erase HOW REL:EXPECT...: nothing of ours is left (rpmdb, /usr/src,
# /var/lib/dkms and our state, modules, units, presets, hooks, config)
left_after_erase() {
	local how=$1 f k p left=()
	shift
	t_start "$F: after $how nothing of ours is left (rpmdb, /usr/src, /var/lib/dkms, extra/, units, presets, hooks, config)"
	for f in /usr/src/"$M"-* /var/lib/dkms/"$M" /var/lib/rxe-kvfix /var/lib/rxe-verify /etc/rxe-verify /etc/rxe-kvfix /var/cache/rxe-kvfix/sources/.memo \
		/usr/libexec/rxe-verify /usr/bin/rxe-verify /usr/lib/rxe-kvfix /usr/lib/kernel/install.d/41-rxe-kvfix.install \
		/etc/kernel/postinst.d/dkms-rxe-kvfix /usr/lib/systemd/system/rxe-verify-boot.service \
		/usr/lib/systemd/system/rxe-kvfix-boot.service /usr/lib/systemd/system/rxe-kvfix-fetch@.service \
		/usr/lib/systemd/system-preset/80-rxe-kvfix.preset /usr/lib/systemd/system-preset/80-rxe-verify.preset \
		/etc/systemd/system/*.wants/rxe-verify-boot.service /etc/systemd/system/*.wants/rxe-kvfix-boot.service; do
		[[ ! -e $f && ! -L $f ]] || left+=("$f")
	done
	for k in "${@%%:*}"; do mapfile -t -O "${#left[@]}" left < <(ours "$k"); done
	for p in rxe-kvfix-dkms rxe-verify; do rpm -q "$p" >/dev/null 2>&1 && left+=("rpmdb:$p"); done
	if ((${#left[@]} == 0)); then t_pass; else t_fail "left behind: ${left[*]}"; fi
}

case $STEP in
install)
	RPMDIR=$1
	shift
	: >"$LOG"
	# rxe-verify is optional (the VM scenario installs rxe-kvfix-dkms alone)
	mapfile -t rpms < <(
		compgen -G "$RPMDIR/rxe-kvfix-dkms-*.noarch.rpm"
		compgen -G "$RPMDIR/rxe-verify-*.rpm" || true
	)
	VER=$(rpm -qp --qf '%{VERSION}' "${rpms[0]}")
	# README's Fedora prerequisites cannot be typed here (no Fedora repositories): the
	# root has them from Debian's packages, and a stand-in RPM tells rpm so
	# the DKMS floor: with an older DKMS (simulated: the base says dkms = 3.0.10, Debian
	# 12's) rpm refuses rxe-kvfix-dkms, naming the floor, and installs nothing
	floor=$(sed -n 's/^DKMS-Minimum:[[:space:]]*//p' "$SRC/META")
	t_start "$F: rpm -i ${rpms[0]##*/} with dkms 3.0.10 (simulated: the base claims it): refused, 'dkms >= $floor is needed'"
	rc=0
	if b=$(BASE_DKMS=3.0.10 make_base "${rpms[@]}"); then
		run rpm -i "${rpms[@]}" || rc=$?
		line=$(grep -m1 -F "dkms >= $floor is needed by $M-dkms-" <<<"$OUT" | sed 's/^[[:space:]]*//') || true
		if ((rc != 0)) && [[ -n $line && -n $floor ]] && ! rpm -q "$M-dkms" >/dev/null 2>&1 && [[ ! -e /var/lib/dkms/$M ]]; then
			t_pass
			echo "     rpm: $line (exit $rc)"
		else
			t_fail "exit $rc, line '${line:-none}': $(logtail)"
		fi
		run rpm -e fedora-shaped-base || true
	else
		t_fail "$b $(logtail)"
	fi
	rm -rf /tmp/base
	# README's list must name every package our RPMs require (a library by its package:
	# libibverbs.so.1 is Fedora's libibverbs), but for what every Fedora install has
	# (systemd, glibc, libstdc++, libgcc); then the base provides each as the root has it
	# shellcheck disable=SC2016 # README's literal $(uname -r)
	readme=$(sed -n 's/^    dnf install //p' "$SRC/README.md" | head -n1 | sed 's/kernel-devel-\$(uname -r)/kernel-devel/')
	t_start "$F: README's dnf install $readme names every package our RPMs require; simulated: fedora-shaped-base provides them, each checked against the root"
	missing='' unnamed='' b=''
	for c in $(rpm -qpR "${rpms[@]}" | awk '{print $1}' | sed -E 's/^(lib[^.]*)\.so\..*/\1/' | sort -u); do
		case $c in rpmlib\(* | config\(* | /* | rtld\(* | systemd | libc | libm | libstdc++ | libgcc_s) continue ;; esac
		[[ " $readme " == *" $c "* ]] || unnamed+="$c "
	done
	if [[ -z $unnamed && -n $readme ]] && b=$(make_base "${rpms[@]}") &&
		missing=$(for c in $readme; do [[ $c == lib* ]] || rpm -q --whatprovides "$c" >/dev/null 2>&1 || printf '%s ' "$c"; done) && [[ -z $missing ]]; then
		t_pass
		echo "     $b"
	else
		t_fail "${unnamed:+the dnf install line of README lacks: $unnamed; }${missing:+not provided of README list: $missing; }${b:-} $(logtail)"
		exit 1
	fi
	first=${1%%:*}
	t_start "$F: kernel-modules of $first owns the in-tree rdma_rxe; rpm -V kernel-modules is clean"
	if make_kernel_modules "$first" && run rpm -V kernel-modules; then t_pass; else t_fail "$(logtail)"; fi
	names=$(rpm -qp --qf '%{NAME} ' "${rpms[@]}")
	# as README's "Install" says: rpm -i ./FILE.rpm... in their directory
	files=()
	for r in "${rpms[@]}"; do files+=("./$(basename "$r")"); done
	t_start "$F: rpm -i ${files[*]} (dependencies checked by rpm, no --nodeps)"
	rc=0
	lc_init rpm "$@"
	lc_begin
	cd "$RPMDIR"
	run rpm -i "${files[@]}" || rc=$?
	cd "$OLDPWD"
	# shellcheck disable=SC2086  # names: one word each
	if ((rc == 0)) && rpm -q $names >/dev/null; then
		POST=$OUT
		t_pass
		grep '^rxe-kvfix-dkms:' <<<"$POST" | sed 's/^/     /'
	else
		t_fail "$(logtail)"
		exit 1
	fi
	lc_end "install $VER (rpm -i)" "$VER" "$(affected "$@")" "$rc" "$POST"
	[[ $names != *rxe-verify* ]] || lc_units "install $VER (rpm -i): the boot units enabled by their preset under Fedora's policy" enabled \
		rxe-kvfix-boot.service rxe-verify-boot.service
	check_kernels "$VER" "$@"
	t_start "$F: rpm -V kernel-modules reports the in-tree rdma_rxe missing (DKMS moved it), exit 1"
	rc=0
	run rpm -V kernel-modules || rc=$?
	if ((rc == 1)) && grep -q "^missing .*/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko" <<<"$OUT"; then
		t_pass
		echo "     $OUT"
	else
		t_fail "exit $rc: $OUT"
	fi
	if [[ $names == *rxe-verify* ]]; then
		t_start "$F: rxe-verify runs from the package; rpm -V rxe-kvfix-dkms rxe-verify clean"
		if /usr/bin/rxe-verify --help 2>&1 | grep -q doctor && run rpm -V rxe-kvfix-dkms rxe-verify; then t_pass; else t_fail "$(logtail)"; fi
	fi
	;;
kernel-upgrade)
	K=$1
	VER=$(rpmver rxe-kvfix-dkms)
	t_start "$F: kernel upgrade to $K: kernel-devel in /usr/src/kernels, kernel-install add runs Fedora's dkms plugin (dkms kernel_postinst)"
	mv "/var/lib/rxe-kvfix-fedora-shape/kernel-devel/$K" "/usr/src/kernels/$K"
	ln -sfn "/usr/src/kernels/$K" "/lib/modules/$K/build"
	ln -sfn "/usr/src/kernels/$K" "/lib/modules/$K/source"
	# only the dkms plugin: the others (loader entry, initrd) need the boot
	# loader and dracut that this root does not have
	if run env KERNEL_INSTALL_PLUGINS=/usr/lib/kernel/install.d/40-dkms.install \
		kernel-install add "$K" "/lib/modules/$K/vmlinuz"; then
		t_pass
		grep -E "Autoinstall|Building|Installing|rdma_rxe" <<<"$OUT" | head -n 4 | sed 's/^/     /'
	else
		t_fail "$(logtail)"
	fi
	check_built "$K" "$VER"
	;;
lifecycle)
	FAM=$1 BASE=$2 BUMP=$3 RELD=$4
	shift 4
	lc_init "$FAM" "$@"
	n=$(affected "$@")
	nv() { rpm -qp --qf '%{VERSION}-%{RELEASE}' "$1"/rxe-kvfix-dkms-*.noarch.rpm; }
	V0=$(nv "$BASE") V1=$(nv "$BUMP") V2=$(nv "$RELD")
	[[ ${V1%-*} == "${V2%-*}" && ${V0%-*} != "${V1%-*}" ]] || {
		t_fail "$F: lifecycle: packages" "$V0, $V1, $V2: need a Version bump, then a Release-only one"
		exit 1
	}
	units=(rxe-kvfix-boot.service)
	[[ -z $(compgen -G "$BASE/rxe-verify-*.rpm") ]] || units+=(rxe-verify-boot.service)
	if [[ $FAM == dnf ]]; then
		# a repository of ours, each package published when its step comes (as an
		# update reaches a host); the metadata is read afresh at every command
		REPO=/srv/rxe-kvfix-lifecycle-repo
		rm -rf "$REPO" && mkdir -p "$REPO"
		publish() { cp "$1"/*.rpm "$REPO/" && rm -f "$REPO"/*.src.rpm && createrepo_c -q --update "$REPO" >/dev/null; }
		mkdir -p /etc/yum.repos.d
		printf '[rxe-kvfix-lifecycle]\nname=rxe-kvfix lifecycle test repository (Fedora-shaped, simulated)\nbaseurl=file://%s\ngpgcheck=0\nmetadata_expire=0\n' \
			"$REPO" >/etc/yum.repos.d/rxe-kvfix-lifecycle.repo
		# no fedora-release here to tell dnf5 the release
		[[ -s /etc/dnf/vars/releasever ]] || { mkdir -p /etc/dnf/vars && echo 44 >/etc/dnf/vars/releasever; }
		publish "$BASE"
		dnf=(dnf5 -y -q --refresh)
		# the install: what a Fedora admin types (dnf install rxe-kvfix-dkms rxe-verify)
		names=(rxe-kvfix-dkms-"$V0")
		((${#units[@]} == 1)) || names+=(rxe-verify-"$V0")
		lc_step "install $V0 (dnf5 install)" "${V0%-*}" "$n" -- "${dnf[@]}" install "${names[@]}" || true
		lc_units "install $V0 (dnf5 install): the boot units enabled by their preset under Fedora's policy" enabled "${units[@]}"
		publish "$BUMP"
		up=("${dnf[@]}" upgrade rxe-kvfix-dkms)
		lc_step "Version upgrade $V0 -> $V1 (dnf5 upgrade)" "${V1%-*}" "$n" -- "${up[@]}" || true
		systemctl disable -q rxe-kvfix-boot.service
		publish "$RELD"
		lc_step "Release-only upgrade $V1 -> $V2 (dnf5 upgrade)" "${V2%-*}" 0 -- "${up[@]}" || true
		lc_units "Release-only upgrade $V1 -> $V2 (dnf5 upgrade): the administrator's systemctl disable kept" disabled rxe-kvfix-boot.service
		systemctl enable -q rxe-kvfix-boot.service
		lc_step "reinstall $V2 (dnf5 reinstall)" "${V2%-*}" 0 -- "${dnf[@]}" reinstall rxe-kvfix-dkms || true
		lc_step "downgrade $V2 -> $V0 (dnf5 downgrade)" "${V0%-*}" "$n" -- "${dnf[@]}" downgrade "rxe-kvfix-dkms-$V0" || true
		lc_units "downgrade $V2 -> $V0 (dnf5 downgrade): the boot units still enabled" enabled "${units[@]}"
		rm_names=(rxe-kvfix-dkms)
		((${#units[@]} == 1)) || rm_names+=(rxe-verify)
		lc_step "erase (dnf5 remove)" - 0 -- "${dnf[@]}" remove "${rm_names[@]}" || true
		left_after_erase "dnf5 remove" "$@"
		rm -rf "$REPO" /etc/yum.repos.d/rxe-kvfix-lifecycle.repo
	else
		lc_step "Version upgrade $V0 -> $V1 (rpm -U)" "${V1%-*}" "$n" -- rpm -U "$BUMP"/rxe-kvfix-dkms-*.noarch.rpm || true
		t_start "$F: after rpm -U exactly ${V1%-*} is left: dkms status, /usr/src, /var/lib/dkms"
		st=$(dkms status "$M" 2>&1)
		old=$(find /usr/src /var/lib/dkms/"$M" -maxdepth 1 -name "*${V0%-*}*" 2>/dev/null)
		if [[ -z $old && $st != *"${V0%-*}"* && $st == *"${V1%-*}"* ]]; then
			t_pass
			echo "     $(tr '\n' ';' <<<"$st")"
		else t_fail "dkms status: $(tr '\n' ' ' <<<"$st") left: $old"; fi
		systemctl disable -q rxe-kvfix-boot.service
		lc_step "Release-only upgrade $V1 -> $V2 (rpm -U)" "${V2%-*}" 0 -- rpm -U "$RELD"/rxe-kvfix-dkms-*.noarch.rpm || true
		lc_units "Release-only upgrade $V1 -> $V2 (rpm -U): the administrator's systemctl disable kept" disabled rxe-kvfix-boot.service
		systemctl enable -q rxe-kvfix-boot.service
		lc_step "reinstall $V2 (rpm --reinstall)" "${V2%-*}" 0 -- rpm --reinstall "$RELD"/rxe-kvfix-dkms-*.noarch.rpm || true
		lc_step "downgrade $V2 -> $V0 (rpm -U --oldpackage)" "${V0%-*}" "$n" -- rpm -U --oldpackage "$BASE"/rxe-kvfix-dkms-*.noarch.rpm || true
		lc_units "downgrade $V2 -> $V0 (rpm -U --oldpackage): the boot units still enabled" enabled "${units[@]}"
	fi
	;;
erase)
	lc_init rpm "$@"
	# the boot repair under Fedora's DKMS configuration (the dracut stand-in counts), as
	# rxe-kvfix-boot.service runs it before rxe-verify-boot.service, told the kernel with
	# RXE_KVFIX_RELEASE (a chroot runs the host's kernel): figures only, no results line
	# (DKMS's own rule, one post_transaction per autoinstall that installed something,
	# already holds it to one; docs/lifecycle.md)
	K='' V=$(rpmver rxe-kvfix-dkms)
	for s in "$@"; do [[ ${s#*:} != affected-* ]] || K=${s%%:*}; done
	if [[ -n $K ]] && grep -qs 'counting stand-in' /usr/bin/dracut; then
		dkms uninstall -m "$M" -v "$V" -k "$K" >/dev/null 2>&1 || true
		for what in "$K without its module" "nothing to do"; do
			n0=$(lc__dracut_calls) t0=$(date +%s.%N)
			run env RXE_KVFIX_RELEASE="$K" /usr/sbin/rxe-kvfix repair || true
			echo "     boot repair ($what): $(($(lc__dracut_calls) - n0)) initramfs regenerations in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s; rdma_rxe of $K: $(lc__resolves "$K")"
		done
	fi
	t_start "$F: rpm -e rxe-kvfix-dkms rxe-verify"
	lc_begin
	rc=0
	run rpm -e rxe-kvfix-dkms rxe-verify || rc=$?
	if ((rc == 0)); then t_pass; else t_fail "$(logtail)"; fi
	lc_end "erase (rpm -e)" - 0 "$rc" "$OUT"
	t_start "$F: after rpm -e the in-tree rdma_rxe is back and resolves for every kernel; rpm -V kernel-modules clean"
	bad=''
	for k in "${@%%:*}"; do
		p=$(resolved "$k")
		[[ $p == "/lib/modules/$k/kernel/drivers/"* && -f $p && -z $(ours "$k") ]] || bad+=" $k:$p"
	done
	if [[ -z $bad ]] && run rpm -V kernel-modules; then t_pass; else t_fail "modinfo -n:$bad; rpm -V: $OUT"; fi
	left_after_erase "rpm -e" "$@"
	;;
negative)
	RPMDIR=$1 K=$2
	t_start "$F: no source RPM: rpm -i rxe-kvfix-dkms succeeds (exit 0), %post warns with DKMS's failure and the dnf remedy"
	rc=0
	run rpm -i "$RPMDIR"/rxe-kvfix-dkms-*.noarch.rpm || rc=$?
	if ((rc == 0)) && rpm -q rxe-kvfix-dkms >/dev/null &&
		grep -q "rxe-kvfix-dkms: warning: DKMS could not build rdma_rxe for $K" <<<"$OUT" &&
		grep -q "^rxe-kvfix: kernel $K: NOT BUILT, .*: no source of kernel $K found.*; dnf download --srpm kernel-" <<<"$OUT"; then
		t_pass
		grep "$K" <<<"$OUT" | sed 's/^/     /'
	else
		t_fail "exit $rc: $(tr '\n' ' ' <<<"$OUT" | cut -c1-400)"
	fi
	t_start "$F: no source RPM: nothing of ours built for $K, the in-tree rdma_rxe still resolves"
	p=$(resolved "$K")
	if [[ -z $(ours "$K") && $p == "/lib/modules/$K/kernel/"* && -f $p ]]; then t_pass; else t_fail "ours '$(ours "$K")', modinfo -n '$p'"; fi
	t_start "$F: no source RPM: rpm -e leaves nothing"
	if run rpm -e rxe-kvfix-dkms && [[ ! -e /var/lib/dkms/$M && -z $(compgen -G "/usr/src/$M-*") ]]; then t_pass; else t_fail "$(logtail)"; fi
	;;
*)
	usage >&2
	exit 2
	;;
esac
exit $((T_FAILS > 0))
