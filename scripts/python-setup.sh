#!/usr/bin/env bash
# python-setup.sh installs the Debian packages the Python client, its tests,
# examples and comparison script need: the PyTorch stack, what pip needs to
# install ./python into a virtual environment offline (venv, setuptools as
# the build backend, wheel), and protoc 3.21.12 (protobuf-compiler), which
# python/protogen.sh generates the stubs with. Idempotent: when every
# package is already installed it only runs dpkg-query and exits.
#
# Debian's packages are used (not pip) because PyPI is not reachable here; they
# belong to /usr/bin/python3, which is why every script calls that interpreter
# rather than whatever python3 comes first on PATH.
set -euo pipefail

pkgs=(
	python3-numpy python3-torch python3-torchvision python3-pil
	python3-grpcio python3-grpc-tools python3-protobuf
	python3-pytest python3-matplotlib
	python3-venv python3-pip python3-setuptools python3-wheel protobuf-compiler
)

missing=()
for p in "${pkgs[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$status" = installed ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "python-setup: all ${#pkgs[@]} packages installed"
	exit 0
fi

echo "python-setup: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
# The image's docker-clean hook deletes downloaded .debs after each dpkg call;
# python3-torch's ~270 dependencies span several dpkg calls, so a later call
# finds its archives gone. An empty Post-Invoke list for this install avoids it.
conf=$(mktemp)
trap 'rm -f "$conf"' EXIT
printf '#clear DPkg::Post-Invoke;\n' >"$conf"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get -c "$conf" install -y -q --no-install-recommends "${missing[@]}"
/usr/bin/python3 -c 'import numpy, torch, torchvision, grpc, grpc_tools, google.protobuf, pytest, setuptools, wheel, venv; print("python-setup: torch", torch.__version__, "torchvision", torchvision.__version__, "grpc", grpc.__version__, "setuptools", setuptools.__version__)'
protoc --version
