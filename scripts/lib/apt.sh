# apt.sh is sourced by the *-setup.sh scripts: apt_ensure NAME PKG... installs
# the Debian packages not yet installed, as root or through sudo, and says
# so under NAME. When every package is there it only runs dpkg-query.
#
# The image's docker-clean hook deletes downloaded .debs after each dpkg
# call; a large install (python3-torch pulls ~270 packages) spans several
# dpkg calls, and a later one finds its archives gone. An empty Post-Invoke
# list for the install avoids it.

apt_ensure() {
	local name=$1
	shift
	local missing=() p status
	for p in "$@"; do
		status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
		[ "$status" = installed ] || missing+=("$p")
	done
	if [ ${#missing[@]} -eq 0 ]; then
		echo "$name: all $# packages installed"
		return 0
	fi
	echo "$name: installing ${missing[*]}" >&2
	local sudo="" conf
	[ "$(id -u)" = 0 ] || sudo=sudo
	conf=$(mktemp)
	printf '#clear DPkg::Post-Invoke;\n' >"$conf"
	$sudo apt-get update -q
	DEBIAN_FRONTEND=noninteractive $sudo apt-get -c "$conf" install -y -q --no-install-recommends "${missing[@]}"
	rm -f "$conf"
	echo "$name: installed ${missing[*]}"
}
