# shellcheck shell=bash
# packaging/packager.sh: who the packages say made them, for packaging/build-deb
# (control's Maintainer, debian/changelog's trailer) and packaging/build-rpm (the
# Packager tag, the %changelog author). Sourced; defines functions only.
#
# The default when the builder has set nothing: a name that is the project's, not a
# person's, at an address under .invalid, the top-level domain reserved never to
# exist (RFC 2606, RFC 6761): no mail can reach anyone by it, and its form is one
# that lintian (no bogus-mail-host) and rpmlint accept.
PKG_DEFAULT_CONTACT='rxe-kvfix maintainers <rxe-kvfix@noreply.invalid>'

# rxe_pkg_contact_ok CONTACT: CONTACT is one line "Name <user@host.domain>": a
# name without < > @ , % { } (deb822 and rpm macros read those), not root, and an
# address whose host has a dot in it (lintian's errors bogus-mail-host, for
# root@localhost, and root-in-contact)
rxe_pkg_contact_ok() {
	local re='^[^<>@,%{}[:cntrl:]]*[^<>@,%{}[:cntrl:][:space:]] <[^<>@,%{}[:space:]]+@[^<>@,%{}[:space:]]+\.[^<>@,%{}[:space:].]+>$'
	[[ $1 =~ $re && ${1% <*} != root && $1 != *\<root@* ]]
}

# rxe_pkg_deb_contact: the Debian Maintainer, from DEBFULLNAME and DEBEMAIL as dch
# reads them: DEBEMAIL may be "Name <mail>", whose name is used unless DEBFULLNAME
# is set; an unset part comes from the default (no passwd or /etc/mailname guess)
rxe_pkg_deb_contact() {
	local name=${DEBFULLNAME:-} mail=${DEBEMAIL:-} re='^(.*[^[:space:]])[[:space:]]+<([^<>]*)>$'
	local def_name=${PKG_DEFAULT_CONTACT% <*} def_mail=${PKG_DEFAULT_CONTACT##*<}
	def_mail=${def_mail%>}
	if [[ $mail =~ $re ]]; then
		name=${name:-${BASH_REMATCH[1]}} mail=${BASH_REMATCH[2]}
	fi
	printf '%s <%s>\n' "${name:-$def_name}" "${mail:-$def_mail}"
}

# rxe_pkg_rpm_packager [PACKAGER]: the RPM packager: PACKAGER (build-rpm's
# --packager), else RPM_PACKAGER, else the builder's %packager macro (as
# ~/.rpmmacros sets it: rpm --eval), else the default
rxe_pkg_rpm_packager() {
	local p=${1:-${RPM_PACKAGER:-}}
	if [[ -z $p ]] && command -v rpm >/dev/null; then p=$(rpm --eval '%{?packager}'); fi
	printf '%s\n' "${p:-$PKG_DEFAULT_CONTACT}"
}

# rxe_pkg_sed_repl TEXT: TEXT escaped for the replacement side of sed's s|...|...|
rxe_pkg_sed_repl() {
	printf '%s\n' "$1" | sed 's/[|&\\]/\\&/g'
}
