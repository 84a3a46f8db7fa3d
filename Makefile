# rxe-kvfix top-level Makefile.
#
#   make                      build the fixed rdma_rxe for KVER (default: running kernel)
#   make install / uninstall  without DKMS, into /lib/modules/KVER/updates/rxe-kvfix
#   make dkms-install         register with DKMS and build/install for KVER
#   make dkms-remove          remove from DKMS (all kernels); stock module returns
#   make validate-patch KTREE=/path/to/linux [KDIR=...] [BOOT=1 [BUILD_KERNEL=1]] [OUT=DIR]
#                             (BOOT=1: build, boot, before/after proof; patches/README.md)
#   make patch-status KTREE=/path/to/linux   one line: needs the fix, has it, or never did
#   make upstream-kit TREE=/path/to/linux [VALIDATION=DIR] [OUT=DIR]
#                             series + cover letter + To/Cc + validation into _build/upstream
#   make userspace            build rxe-verify (CMake)
#   make dist                 _build/dist/rxe-kvfix-VERSION.tar.gz of the files git tracks
#   make rpm / make deb       packages from that tarball into _build/pkg (packaging/README.md)
#   make rpm RPM_SIGN_KEY=ID  the RPMs signed with that GnuPG key (rpmsign --addsign;
#                             Fedora trusts it after rpmkeys --import KEY.asc: docs/install.md)
#   make demo                 the main job: stock vs fixed, side by side, in a VM
#   make bench                benchmarks, stock beside fixed (full form, ~11G guest) -> tests/bench/
#   make bench-upgrade        what rxe-kvfix adds to a kernel upgrade (apt, Fedora-shaped) -> tests/bench/UPGRADE.md
#   make check                every test (what CI runs)
#   make check-quick          the day-to-day subset (one kernel)
#   make check-debug          the fix under KASAN, kmemleak, lockdep, fault injection (a debug kernel, VM)
#   make check-tree           the tree is whole and dkms.conf's version is META's
#   make dkms-src             the DKMS source tree into DESTDIR/usr/src/rxe-kvfix-VERSION
#   make hooks-install / hooks-uninstall   the kernel hooks, boot units and admin command
#   make clean                remove the build output (_build, build)
#   make help                 this text
#
# Variables: KVER, KDIR (kbuild dir, default /lib/modules/KVER/build),
# KERNEL_TREE / CACHE_DIR / SRPM (source providers, see kmod/rxe-kvfix-prepare),
# DESTDIR, BUILD_DIR (make's module build, default _build/KVER), CMAKE_BUILD_DIR
# (default build), SBINDIR, SYSTEMD_UNITDIR, SYSTEMD_PRESETDIR (install paths),
# DIST_DIR, PKG_DIR (dist and package output), RPM_SIGN_KEY (make rpm: sign with this
# GnuPG key id), RPM_ARGS (more packaging/build-rpm options, e.g. --dkms-only),
# PERFTEST_SRC, BENCH_PARTS, BENCH_OUT, BENCH_UPGRADE_OUT (make bench, bench-upgrade).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# META holds the name and version; everything else is derived from it.
meta = $(shell sed -n 's/^$(1):[[:space:]]*\([^[:space:]]*\).*/\1/p' "$(CURDIR)/META" 2>/dev/null | head -n1)
PACKAGE := $(call meta,Name)
VERSION := $(call meta,Version)
ifeq ($(and $(PACKAGE),$(VERSION)),)
$(error no Name: or Version: in $(CURDIR)/META; restore it from git (git checkout META))
endif
KVER ?= $(shell uname -r)
KDIR ?= /lib/modules/$(KVER)/build
BUILD_DIR ?= $(CURDIR)/_build/$(KVER)
CMAKE_BUILD_DIR ?= $(CURDIR)/build
DKMS_SRC := $(DESTDIR)/usr/src/$(PACKAGE)-$(VERSION)
MODDIR := $(DESTDIR)/lib/modules/$(KVER)/updates/$(PACKAGE)

PREPARE_ARGS :=
ifneq ($(KERNEL_TREE),)
PREPARE_ARGS += --kernel-tree $(KERNEL_TREE)
endif
ifneq ($(CACHE_DIR),)
PREPARE_ARGS += --cache $(CACHE_DIR)
endif
ifneq ($(SRPM),)
PREPARE_ARGS += --srpm $(SRPM)
endif

.PHONY: all module install uninstall check-tree dkms-src hooks-install hooks-uninstall dkms-install dkms-remove validate-patch patch-status upstream-kit \
	userspace dist rpm deb demo bench bench-upgrade check check-quick check-debug clean help

all: module

# help: the comment block at the top, whole (from its third line to the first line
# that is not a comment), so a line added there is shown without editing this rule
help:
	@awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' Makefile

# A goal (or prerequisite file) with no rule: one line naming what to do.
.DEFAULT:
	@echo "make: no target or file '$@' in rxe-kvfix; run 'make help' for the targets" >&2; exit 2

# The same build driver as DKMS's (kmod/rxe-kvfix-dkms-build: prepare, kbuild, the
# object check, the record), in $(BUILD_DIR)/src; its record goes to a scratch
# directory read here and dropped (the host's records are DKMS's).
module:
	@if [[ ! -f "$(KDIR)/Makefile" ]]; then \
		echo "make: no kernel build tree at $(KDIR); install the headers of $(KVER) (Debian: apt install linux-headers-$(KVER); Fedora: dnf install kernel-devel-$(KVER)) or pass KDIR=" >&2; exit 1; fi
	@st=$$(mktemp -d); trap 'rm -rf "$$st"' EXIT; rc=0; \
	RXE_KVFIX_STATE_DIR=$$st kmod/rxe-kvfix-dkms-build --quiet --dir "$(BUILD_DIR)" "$(KVER)" "$(KDIR)" -- $(PREPARE_ARGS) >/dev/null || rc=$$?; \
	state=$$(. kmod/rxe-kvfix-lib.sh && RXE_KVFIX_STATE_DIR=$$st rxe_kvfix_recorded "$(KVER)" state); \
	if [[ $$rc == 0 ]]; then echo "make: built $(BUILD_DIR)/src/rdma_rxe.ko for $(KVER)"; \
	elif [[ $$rc == 77 && $$state == not-needed ]]; then echo "make: nothing to build for $(KVER): it does not need rxe-kvfix"; rm -f "$(BUILD_DIR)/src/rdma_rxe.ko"; \
	else exit 1; fi

install:
	@[[ -f "$(BUILD_DIR)/src/rdma_rxe.ko" ]] || { echo "make: no module built for $(KVER); run 'make KVER=$(KVER)' first" >&2; exit 1; }
	install -D -m 0644 "$(BUILD_DIR)/src/rdma_rxe.ko" "$(MODDIR)/rdma_rxe.ko"
	@if [[ -z "$(DESTDIR)" ]]; then depmod -a "$(KVER)"; \
		echo "make: installed; 'modinfo -n rdma_rxe' now resolves to $$(modinfo -k "$(KVER)" -n rdma_rxe)"; fi

uninstall:
	@[[ -n "$(DESTDIR)" || -d "/lib/modules/$(KVER)" ]] || { echo "make: no kernel $(KVER) in /lib/modules; pass KVER= of an installed kernel (ls /lib/modules)" >&2; exit 1; }
	rm -f "$(MODDIR)/rdma_rxe.ko"
	rmdir "$(MODDIR)" 2>/dev/null || true
	@if [[ -z "$(DESTDIR)" ]]; then depmod -a "$(KVER)"; fi

# dkms.conf is committed (a clone is a DKMS tree: `dkms add .`) and writes its
# PACKAGE_VERSION literally; META is the version's source, so every target that
# ships or registers the tree first checks that the two agree, and that the tree
# is whole (kmod/ is what DKMS runs: a partial copy fails late and obscurely).
# the libraries every kmod/ script reads (through rxe-kvfix-lib.sh), and prepare's halves
KMOD_LIBS := kmod/rxe-kvfix-kernel.sh kmod/rxe-kvfix-record.sh kmod/rxe-kvfix-lock.sh
PREPARE_LIBS := kmod/rxe-kvfix-source.sh kmod/rxe-kvfix-memo.sh
# the fetch's halves, sourced by kmod/rxe-kvfix-fetch
FETCH_LIBS := kmod/rxe-kvfix-fetch-debian.sh kmod/rxe-kvfix-fetch-fedora.sh
# the admin command (kmod/rxe-kvfix) and its parts, installed in /usr/lib/rxe-kvfix
ADMIN_FILES := kmod/rxe-kvfix kmod/rxe-kvfix-status.sh kmod/rxe-kvfix-repair.sh kmod/rxe-kvfix-pkg.sh kmod/rxe-kvfix-status.schema.json
TREE_FILES := dkms.conf kmod/rxe-kvfix-prepare $(PREPARE_LIBS) kmod/rxe-kvfix-fetch $(FETCH_LIBS) kmod/rxe-kvfix-dkms-build kmod/rxe-kvfix-postbuild kmod/rxe-kvfix-objcheck \
	kmod/rxe-kvfix-lib.sh $(KMOD_LIBS) kmod/Kbuild.rxe kmod/rxe_kvfix_id.c kmod/rxe-kvfix-kernel-hook kmod/rxe-kvfix.conf \
	$(ADMIN_FILES) kmod/rxe-kvfix.8.in \
	kmod/rxe-kvfix-boot.service kmod/rxe-kvfix-fetch@.service kmod/rxe-kvfix.preset

check-tree:
	@for f in $(TREE_FILES); do [[ -f "$(CURDIR)/$$f" ]] || { \
		echo "make: $(CURDIR) has no $$f (a partial copy of rxe-kvfix); use the whole tree: git clone it, or unpack make dist's tarball" >&2; exit 1; }; done
	@why=$$(. kmod/rxe-kvfix-lib.sh && rxe_kvfix_versions_agree "$(CURDIR)") || { \
		echo "make: $$why; write the same version in both (META is the version's source)" >&2; exit 1; }

# The DKMS source tree: dkms.conf, META (kmod/rxe-kvfix-prepare reads the
# version from it), what the build runs of kmod/ (not the test matrix kernels.tsv)
# and patches/ only.
$(DKMS_SRC): check-tree dkms.conf META $(wildcard kmod/* patches/*/*.patch)
	rm -rf "$(DKMS_SRC)"
	install -d "$(DKMS_SRC)/kmod" "$(DKMS_SRC)/patches/mainline" "$(DKMS_SRC)/patches/stable"
	install -m 0644 dkms.conf META "$(DKMS_SRC)/"
	install -m 0755 kmod/rxe-kvfix-dkms-build kmod/rxe-kvfix-prepare kmod/rxe-kvfix-fetch kmod/rxe-kvfix-postbuild kmod/rxe-kvfix-objcheck "$(DKMS_SRC)/kmod/"
	install -m 0644 kmod/rxe-kvfix-lib.sh $(KMOD_LIBS) $(PREPARE_LIBS) $(FETCH_LIBS) kmod/Kbuild.rxe kmod/rxe_kvfix_id.c "$(DKMS_SRC)/kmod/"
	install -m 0644 patches/mainline/*.patch "$(DKMS_SRC)/patches/mainline/"
	install -m 0644 patches/stable/*.patch "$(DKMS_SRC)/patches/stable/"

dkms-src: $(DKMS_SRC)

# The kernel hook (kmod/rxe-kvfix-kernel-hook): prints DKMS's recorded failure for a
# new kernel, forgets a removed one; never fails a kernel's installation. Debian's
# /etc/kernel hooks run it after dkms's (run-parts order: "dkms" < "dkms-rxe-kvfix"),
# kernel-install after 40-dkms.install.
HOOK := $(DESTDIR)/usr/lib/$(PACKAGE)/rxe-kvfix-kernel-hook
# the admin command beside it (/usr/sbin/rxe-kvfix links to it), with what it sources
ADMIN_DIR := $(DESTDIR)/usr/lib/$(PACKAGE)
SBINDIR ?= /usr/sbin
HOOK_LINKS := $(DESTDIR)/etc/kernel/postinst.d/dkms-rxe-kvfix $(DESTDIR)/etc/kernel/header_postinst.d/dkms-rxe-kvfix \
	$(DESTDIR)/etc/kernel/postrm.d/rxe-kvfix $(DESTDIR)/usr/lib/kernel/install.d/41-rxe-kvfix.install
# With it the configuration file (kmod/rxe-kvfix.conf: fetch=auto|never), never
# over one the administrator has, and the boot-time repair rxe-kvfix-boot.service
# (SYSTEMD_UNITDIR; enabled by the packages, and by dkms-install where systemctl is),
# with its preset line (kmod/rxe-kvfix.preset: what %systemd_post applies on Fedora,
# whose policy otherwise disables it) beside the units' directory.
CONF_FILE := $(DESTDIR)/etc/$(PACKAGE)/rxe-kvfix.conf
SYSTEMD_UNITDIR ?= /usr/lib/systemd/system
SYSTEMD_PRESETDIR ?= $(patsubst %/,%,$(dir $(SYSTEMD_UNITDIR)))/system-preset
BOOT_UNIT := $(DESTDIR)$(SYSTEMD_UNITDIR)/rxe-kvfix-boot.service
FETCH_UNIT := $(DESTDIR)$(SYSTEMD_UNITDIR)/rxe-kvfix-fetch@.service
PRESET := $(DESTDIR)$(SYSTEMD_PRESETDIR)/80-rxe-kvfix.preset
hooks-install:
	install -D -m 0755 kmod/rxe-kvfix-kernel-hook "$(HOOK)"
	install -m 0755 kmod/rxe-kvfix "$(ADMIN_DIR)/"
	install -m 0644 kmod/rxe-kvfix-lib.sh $(KMOD_LIBS) kmod/rxe-kvfix-status.sh kmod/rxe-kvfix-repair.sh \
		kmod/rxe-kvfix-pkg.sh kmod/rxe-kvfix-status.schema.json META "$(ADMIN_DIR)/"
	install -d "$(DESTDIR)$(SBINDIR)"
	ln -sfn ../lib/$(PACKAGE)/rxe-kvfix "$(DESTDIR)$(SBINDIR)/rxe-kvfix"
	install -d "$(DESTDIR)/usr/share/man/man8"
	sed 's/@VERSION@/$(VERSION)/' kmod/rxe-kvfix.8.in >"$(DESTDIR)/usr/share/man/man8/rxe-kvfix.8"
	@for l in $(HOOK_LINKS); do install -d "$$(dirname "$$l")"; ln -sfn /usr/lib/$(PACKAGE)/rxe-kvfix-kernel-hook "$$l"; done
	@[[ -e "$(CONF_FILE)" ]] || install -D -m 0644 kmod/rxe-kvfix.conf "$(CONF_FILE)"
	install -D -m 0644 kmod/rxe-kvfix-boot.service "$(BOOT_UNIT)"
	install -D -m 0644 kmod/rxe-kvfix-fetch@.service "$(FETCH_UNIT)"
	install -D -m 0644 kmod/rxe-kvfix.preset "$(PRESET)"

hooks-uninstall:
	@if [[ -z "$(DESTDIR)" ]] && command -v systemctl >/dev/null; then systemctl disable -q rxe-kvfix-boot.service 2>/dev/null || true; fi
	rm -f $(HOOK_LINKS) "$(HOOK)" "$(BOOT_UNIT)" "$(FETCH_UNIT)" "$(PRESET)" "$(DESTDIR)$(SBINDIR)/rxe-kvfix" \
		"$(DESTDIR)/usr/share/man/man8/rxe-kvfix.8"
	rm -f $(addprefix "$(ADMIN_DIR)/,$(addsuffix ",$(notdir kmod/rxe-kvfix-lib.sh $(KMOD_LIBS) $(ADMIN_FILES)) META))
	rmdir "$(DESTDIR)/usr/lib/$(PACKAGE)" 2>/dev/null || true
	@if [[ -f "$(CONF_FILE)" ]] && cmp -s kmod/rxe-kvfix.conf "$(CONF_FILE)"; then rm -f "$(CONF_FILE)"; rmdir "$$(dirname "$(CONF_FILE)")" 2>/dev/null || true; fi

# The tree, dkms and another registered version are checked before the source
# tree is copied to /usr/src, so a refused host is left as it was.
dkms-install: check-tree
	@command -v dkms >/dev/null || { echo "make: dkms is not installed; apt install dkms (Debian) or dnf install dkms (Fedora)" >&2; exit 1; }
	@other=$$(dkms status -m $(PACKAGE) 2>/dev/null | sed -n 's|^$(PACKAGE)/\([^,:]*\)[,:].*|\1|p' | grep -vFx '$(VERSION)' | head -n1) || true; \
	[[ -z $$other ]] || { echo "make: $(PACKAGE) $$other is already registered with DKMS; remove it first (dkms remove $(PACKAGE)/$$other --all), then run make dkms-install again" >&2; exit 1; }
	@$(MAKE) --no-print-directory dkms-src >/dev/null
	@if ! dkms status -m $(PACKAGE) -v $(VERSION) | grep -q .; then dkms add -m $(PACKAGE) -v $(VERSION); fi
	@$(MAKE) --no-print-directory hooks-install >/dev/null
	@if command -v systemctl >/dev/null; then systemctl enable -q rxe-kvfix-boot.service 2>/dev/null || true; fi
	@rc=0; dkms install -m $(PACKAGE) -v $(VERSION) -k "$(KVER)" || rc=$$?; \
	if [[ $$rc == 77 ]] && ! kmod/rxe-kvfix status "$(KVER)" >/dev/null 2>&1; then \
		kmod/rxe-kvfix report "$(KVER)"; exit 1; fi; \
	if [[ $$rc == 77 ]]; then echo "make: DKMS skipped $(KVER): it does not need rxe-kvfix (see /var/lib/dkms/$(PACKAGE)/$(VERSION)/build/make.log)"; exit 0; fi; \
	exit $$rc

dkms-remove:
	@command -v dkms >/dev/null || { echo "make: dkms is not installed, so rxe-kvfix is not registered with it; for a non-DKMS install run 'make uninstall'" >&2; exit 1; }
	@if dkms status -m $(PACKAGE) -v $(VERSION) | grep -q .; then dkms remove -m $(PACKAGE) -v $(VERSION) --all; fi
	rm -rf "$(DKMS_SRC)" /var/lib/$(PACKAGE)
	@for p in /var/cache/$(PACKAGE)/sources/*.provenance; do [[ -f $$p ]] || continue; rm -f "$${p%.provenance}" "$$p"; done
	@$(MAKE) --no-print-directory hooks-uninstall >/dev/null

validate-patch:
	@[[ -n "$(KTREE)" ]] || { echo "make: validate-patch needs KTREE=/path/to/kernel/tree: pass the kernel source tree to check the patches against" >&2; exit 2; }
	patches/validate $(if $(filter command line environment,$(origin KDIR)),--kdir "$(KDIR)") \
		$(if $(filter 1,$(BOOT)),--boot) $(if $(filter 1,$(BUILD_KERNEL)),--build-kernel) $(if $(filter command line environment,$(origin OUT)),--out "$(OUT)") "$(KTREE)"

patch-status:
	@[[ -n "$(KTREE)" ]] || { echo "make: patch-status needs KTREE=/path/to/kernel/tree: pass the kernel source tree to classify" >&2; exit 2; }
	@patches/validate --status "$(KTREE)"

upstream-kit:
	@[[ -n "$(TREE)" ]] || { echo "make: upstream-kit needs TREE=/path/to/kernel/tree: pass the tree the series goes to (rdma for-next or mainline)" >&2; exit 2; }
	patches/upstream-kit $(if $(filter command line environment,$(origin VALIDATION)),--validation "$(VALIDATION)") \
		$(if $(filter command line environment,$(origin OUT)),--out "$(OUT)") "$(TREE)"

userspace:
	cmake -S . -B "$(CMAKE_BUILD_DIR)" -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build "$(CMAKE_BUILD_DIR)" -j"$$(nproc)"

# Source tarball: exactly what git tracks (local junk and build output never ship).
DIST_DIR ?= $(CURDIR)/_build/dist
DIST_TARBALL := $(DIST_DIR)/$(PACKAGE)-$(VERSION).tar.gz
PKG_DIR ?= $(CURDIR)/_build/pkg

dist: check-tree
	@git -C "$(CURDIR)" rev-parse --git-dir >/dev/null 2>&1 || { echo "make: dist needs a git checkout of rxe-kvfix (it ships the files git tracks)" >&2; exit 1; }
	@mkdir -p "$(DIST_DIR)"
	@git -C "$(CURDIR)" ls-files -z | (cd "$(CURDIR)" && xargs -0 -r ls -d -- 2>/dev/null | tr '\n' '\0') | \
		tar -C "$(CURDIR)" --null -T - --sort=name --owner=0 --group=0 --numeric-owner --mode=go-w \
		--mtime="@$$(git -C "$(CURDIR)" log -1 --format=%ct)" --transform 's,^,$(PACKAGE)-$(VERSION)/,' -cf - | \
		gzip -n -9 >"$(DIST_TARBALL).tmp"
	@mv "$(DIST_TARBALL).tmp" "$(DIST_TARBALL)"
	@echo "make: wrote $(DIST_TARBALL) ($$(tar -tzf "$(DIST_TARBALL)" | grep -vc '/$$') files)"

# RPM_SIGN_KEY: a GnuPG key id (user id or fingerprint in $GNUPGHOME) rpmsign signs
# both RPMs with; unsigned when empty
RPM_SIGN_KEY ?=
RPM_ARGS ?=
rpm: dist
	packaging/build-rpm --out "$(PKG_DIR)/rpm" $(if $(RPM_SIGN_KEY),--sign "$(RPM_SIGN_KEY)") $(RPM_ARGS) "$(DIST_TARBALL)"

deb: dist
	packaging/build-deb --out "$(PKG_DIR)/deb" "$(DIST_TARBALL)"

demo:
	tests/demo

# Registration cost (interleaved ABBA rounds), kernel memory, bandwidth, both tools at
# their own defaults with rxe-verify's waiting modes and their CPU, and the fragmented
# guest, stock rdma_rxe beside rxe-kvfix in one VM boot (full form; CI runs
# the short form): rewrites tests/bench/RESULTS.md, tests/bench/summary.json (the figures
# it is rendered from) and the plots tests/bench/*.png (gnuplot). BENCH_OUT: the raw
# per-run outputs, the samples (vm/bench-KERNEL/results.json) among them. PERFTEST_SRC: a
# clone or mirror of linux-rdma/perftest for the peer comparison with perftest 26.x
# --data_validation (built from it, never downloaded; without it those runs are SKIPped).
# BENCH_PARTS: the parts to run (reg,bw,defaults,frag,dp; dp: the fix's cost on the data
# path, tests/vm/guest/dp.sh); some of them, e.g. `make bench
# BENCH_PARTS=defaults` (~20 min instead of 75), are merged into the published
# summary.json part by part (tests/bench/render merge), the other parts' figures kept and
# RESULTS.md saying which boot each part comes from.
PERFTEST_SRC ?=
BENCH_PARTS ?= reg,bw,defaults,frag,dp
BENCH_OUT ?= $(CURDIR)/results/bench
bench:
	tests/run-all --only vm --results "$(BENCH_OUT)" --set scenarios=bench --set bench_form=full \
		--set bench_publish="$(CURDIR)/tests/bench" --set perftest_src="$(PERFTEST_SRC)" \
		--set bench_parts="$(BENCH_PARTS)"

# A kernel upgrade with and without rxe-kvfix (tests/bench/kernel-upgrade: ABBA pairs of
# apt-get install of the series-upgrade kernel in a build root, then the Fedora-shaped
# dnf path once): rewrites tests/bench/UPGRADE.md; raw rounds in BENCH_UPGRADE_OUT.
BENCH_UPGRADE_OUT ?= $(CURDIR)/results/bench-upgrade
bench-upgrade:
	tests/bench/kernel-upgrade --pairs 3 --fedora --out "$(BENCH_UPGRADE_OUT)" --publish "$(CURDIR)/tests/bench/UPGRADE.md"

check:
	tests/run-all

check-quick:
	tests/run-all --quick

check-debug:
	tests/run-all --only vm --set scenarios=debug --set debug_enable=1

clean:
	rm -rf _build "$(CMAKE_BUILD_DIR)"
