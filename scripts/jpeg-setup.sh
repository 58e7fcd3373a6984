#!/usr/bin/env bash
# jpeg-setup.sh installs the Debian packages of the JPEG work: libturbojpeg0
# (libjpeg-turbo 2.1.5's TurboJPEG API, which loader/imagedec loads at run
# time with purego; the same release Debian's PIL links), libjpeg62-turbo
# (its libjpeg API, libjpeg.so.62, for decoding only a crop) and, for
# scripts/make-large-images.py, the photographs of gnome-backgrounds and
# mate-backgrounds. Idempotent: when every package is already installed it
# only runs dpkg-query and exits.
set -euo pipefail

. "$(dirname "$0")/lib/apt.sh"
apt_ensure jpeg-setup libturbojpeg0 libjpeg62-turbo gnome-backgrounds mate-backgrounds
for lib in libturbojpeg.so.0 libjpeg.so.62; do
  ls /usr/lib/*/$lib >/dev/null 2>&1 || { echo "jpeg-setup: $lib missing after install" >&2; exit 1; }
done
