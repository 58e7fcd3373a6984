#!/usr/bin/env bash
# jpeg-setup.sh installs the Debian packages of the JPEG work: libturbojpeg0
# (libjpeg-turbo 2.1.5's TurboJPEG API, which loader/imagedec loads at run
# time with purego; the same release Debian's PIL links) and, for
# scripts/make-large-images.py, the photographs of gnome-backgrounds and
# mate-backgrounds. Idempotent: when every package is already installed it
# only runs dpkg-query and exits.
set -euo pipefail

pkgs=(libturbojpeg0 gnome-backgrounds mate-backgrounds)

missing=()
for p in "${pkgs[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$status" = installed ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "jpeg-setup: all ${#pkgs[@]} packages installed"
	exit 0
fi

echo "jpeg-setup: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
# The image's docker-clean hook deletes downloaded .debs after each dpkg
# call (see python-setup.sh); an empty Post-Invoke list avoids it.
conf=$(mktemp)
trap 'rm -f "$conf"' EXIT
printf '#clear DPkg::Post-Invoke;\n' >"$conf"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get -c "$conf" install -y -q --no-install-recommends "${missing[@]}"
ls /usr/lib/*/libturbojpeg.so.0 >/dev/null 2>&1 || { echo "jpeg-setup: libturbojpeg.so.0 still missing after install" >&2; exit 1; }
echo "jpeg-setup: installed ${missing[*]}"
