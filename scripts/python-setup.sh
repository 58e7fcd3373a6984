#!/usr/bin/env bash
# python-setup.sh installs the Debian packages the Python client, its tests,
# examples and comparison script need: the PyTorch stack, what pip needs to
# install ./python into a virtual environment offline (venv, setuptools as
# the build backend, wheel), mypy 1.0 (python3-mypy, Debian main), which
# python-test.sh checks the package's annotations with, and protoc 3.21.12
# (protobuf-compiler), which python/protogen.sh generates the stubs with. Idempotent: when every
# package is already installed it runs dpkg-query and the import check only.
#
# Debian's packages are used (not pip) because PyPI is not reachable here; they
# belong to /usr/bin/python3, which is why every script calls that interpreter
# rather than whatever python3 comes first on PATH.
set -euo pipefail

pkgs=(
	python3-numpy python3-torch python3-torchvision python3-pil
	python3-grpcio python3-grpc-tools python3-protobuf
	python3-pytest python3-matplotlib python3-mypy
	python3-venv python3-pip python3-setuptools python3-wheel protobuf-compiler
)

. "$(dirname "$0")/lib/apt.sh"
apt_ensure python-setup "${pkgs[@]}"
/usr/bin/python3 -c 'import numpy, torch, torchvision, grpc, grpc_tools, google.protobuf, pytest, setuptools, wheel, venv, mypy; print("python-setup: torch", torch.__version__, "torchvision", torchvision.__version__, "grpc", grpc.__version__, "setuptools", setuptools.__version__)'
protoc --version
