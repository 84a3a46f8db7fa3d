#!/usr/bin/env bash
# rpm-sign.sh: `make rpm RPM_SIGN_KEY=ID` signs the packages, and a host trusts them
# only once it has imported that key, as docs/install.md tells a Fedora 45 host
# (rpmkeys --import KEY.asc). On this host, with a throwaway GnuPG key made here (RSA
# 2048, one day): make rpm RPM_SIGN_KEY=<its fingerprint> RPM_ARGS=--dkms-only
# (rxe-kvfix-dkms alone: nothing compiled; rxe-verify is signed by the same rpmsign
# call, which the rpm stage's full build checks), DIST_DIR and PKG_DIR in a scratch
# directory; then rpmkeys --checksig against two rpm databases of their own:
#   - the key imported (rpmkeys --import of gpg --export -a): "digests signatures OK";
#   - no key: "digests SIGNATURES NOT OK", exit non-zero (what rpm -i refuses once
#     Fedora enforces signatures).
#
#   tests/pkg/rpm-sign.sh     (host only: gpg, rpmbuild, rpmsign, rpmkeys, git)
#
# Cost: about 6 s, measured 2026-12-07.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RXE_PROG=rpm-sign
export RXE_PROG
# shellcheck source=tests/testlib.sh
. "$REPO/tests/testlib.sh"
t_suite pkg

t_no_args "Usage: tests/pkg/rpm-sign.sh   (host only: gpg, rpmbuild, rpmsign, rpmkeys, git)" "$@"
t_workdir rpm-sign

export GNUPGHOME=$W/gnupg
mkdir -m 0700 "$GNUPGHOME"
gpg --batch --quiet --passphrase '' --quick-gen-key "rxe-kvfix throwaway signer <root@localhost>" rsa2048 sign 1d 2>/dev/null
FPR=$(gpg --batch --with-colons --list-keys "rxe-kvfix throwaway signer" | awk -F: '$1 == "fpr" { print $10; exit }')
gpg --batch --export -a "$FPR" >"$W/KEY.asc"

t_start "make rpm RPM_SIGN_KEY=<a throwaway key's fingerprint> RPM_ARGS=--dkms-only: rxe-kvfix-dkms built (signed: the next two lines)"
rc=0
nice -n 5 make -s -C "$REPO" rpm RPM_SIGN_KEY="$FPR" RPM_ARGS=--dkms-only DIST_DIR="$W/dist" PKG_DIR="$W/pkg" \
	>"$W/make.log" 2>&1 || rc=$?
# build-rpm prints the path of every RPM it built
RPM=$(grep -m1 '/rxe-kvfix-dkms-.*\.noarch\.rpm$' "$W/make.log" || true)
if ((rc == 0)) && [[ -f $RPM ]]; then t_pass; else t_fail "make rpm exit $rc: $(tail -n 3 "$W/make.log" | tr '\n' ' ')"; fi

# checksig DBDIR: rpmkeys --checksig of RPM against the rpm database in DBDIR; sets OUT, RC
checksig() {
	RC=0
	OUT=$(rpmkeys --dbpath "$1" --checksig "$RPM" 2>&1) || RC=$?
}
mkdir -p "$W/db-trusted" "$W/db-empty"
rpmkeys --dbpath "$W/db-trusted" --initdb 2>/dev/null || rpm --dbpath "$W/db-trusted" --initdb
rpmkeys --dbpath "$W/db-empty" --initdb 2>/dev/null || rpm --dbpath "$W/db-empty" --initdb

t_start "rpmkeys --checksig with the key imported (rpmkeys --import KEY.asc): digests signatures OK"
if [[ -f ${RPM:-} ]] && rpmkeys --dbpath "$W/db-trusted" --import "$W/KEY.asc" && checksig "$W/db-trusted" &&
	((RC == 0)) && [[ $OUT == *": digests signatures OK" ]]; then
	t_pass
	echo "     $OUT"
else
	t_fail "exit ${RC:-?}: ${OUT:-no RPM}"
fi

t_start "rpmkeys --checksig without the key: digests SIGNATURES NOT OK (exit non-zero)"
if [[ -f ${RPM:-} ]] && checksig "$W/db-empty" && ((RC != 0)) && [[ $OUT == *": digests SIGNATURES NOT OK" ]]; then
	t_pass
	echo "     $OUT"
else
	t_fail "exit ${RC:-?}: ${OUT:-no RPM}"
fi
((${T_FAILS:-0} == 0))
