# Sourced by jobs/setup.sh and jobs/aarch64_check.sh: the one way this project installs
# Debian packages.
#   la_apt_missing PKG...   prints the packages of the list that are not installed
#   la_apt_install PKG...   installs those (as root: apt-get update, then apt-get install -y
#                           $LA_APT_OPTS); not root and some missing: one `linattn: error:`
#                           line naming them, status 1
la_apt_missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || printf '%s\n' "$p"
  done
}
la_apt_install() {
  local missing
  mapfile -t missing < <(la_apt_missing "$@")
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "linattn: error: missing Debian packages: ${missing[*]} (run as root, or: apt-get install ${missing[*]})" >&2
    return 1
  fi
  echo "linattn: installing ${missing[*]}" >&2
  apt-get update -qq || { echo "linattn: error: apt-get update failed" >&2; return 1; }
  # shellcheck disable=SC2086  # LA_APT_OPTS is a list of options
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${LA_APT_OPTS:-} "${missing[@]}" >/dev/null ||
    { echo "linattn: error: apt-get install ${missing[*]} failed" >&2; return 1; }
}
