"""The one build step pyproject.toml cannot declare: the daemon inside.

scripts/wheel.sh builds cmd/loaderd into loaderd/bin/loaderd (in a copy of
this directory) before building the wheel. With it there, the wheel is a
platform wheel, py3-none-<platform> (the Python code is version-neutral; the
daemon is a Linux executable for one CPU), installed into platlib, and it
gets the `loaderd` command (_loaderd_cli.py). Without it (`pip install
./python`, an sdist) the wheel is the pure client, py3-none-any, with no
command: loaderd.serve() then finds a daemon through $LOADERD_BIN or PATH.

The platform tag: the daemon is built with CGO_ENABLED=0, so it has no C
of its own; it is still dynamically linked, because purego (which dlopens
libturbojpeg at run time) makes the Go linker import dlopen, pthread_* and
malloc from libc.so.6, libdl.so.2 and libpthread.so.0, unversioned. Those
are on manylinux's allowed list and in every glibc since 2.17, so the tag is
manylinux_2_17 (manylinux2014); it is not musllinux (the interpreter is
glibc's ld-linux). LOADERD_WHEEL_PLATFORM overrides it.
"""

import os

from setuptools import Distribution, setup

try:  # setuptools >= 70.1 carries bdist_wheel; before, the wheel package does
    from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel as _bdist_wheel

DAEMON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loaderd", "bin", "loaderd")
_ELF_MACHINES = {62: "x86_64", 183: "aarch64"}  # e_machine: EM_X86_64, EM_AARCH64


def daemon_platform():
    """The wheel platform of the bundled daemon, or None when there is none."""
    try:
        with open(DAEMON, "rb") as f:
            head = f.read(20)
    except FileNotFoundError:
        return None
    if head[:4] != b"\x7fELF" or head[4:6] != b"\x02\x01":
        raise SystemExit(f"setup.py: {DAEMON} is not a 64-bit little-endian ELF executable")
    arch = _ELF_MACHINES.get(int.from_bytes(head[18:20], "little"))
    if arch is None:
        raise SystemExit(f"setup.py: {DAEMON}: ELF machine {int.from_bytes(head[18:20], 'little')} "
                         f"is none of {sorted(_ELF_MACHINES.values())}")
    if not os.access(DAEMON, os.X_OK):
        raise SystemExit(f"setup.py: {DAEMON} is not executable")
    return os.environ.get("LOADERD_WHEEL_PLATFORM") or f"manylinux_2_17_{arch}.manylinux2014_{arch}"


PLATFORM = daemon_platform()


class PlatformDistribution(Distribution):
    """With the daemon bundled the package is not pure: installed into
    platlib, at the wheel's root (not under .data/purelib)."""

    def has_ext_modules(self):
        return bool(PLATFORM)


class bdist_wheel(_bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        if PLATFORM:
            self.root_is_pure = False  # an executable belongs in platlib

    def get_tag(self):
        if PLATFORM:
            return "py3", "none", PLATFORM
        return super().get_tag()


setup(
    distclass=PlatformDistribution,
    cmdclass={"bdist_wheel": bdist_wheel},
    entry_points={"console_scripts": ["loaderd = _loaderd_cli:main"]} if PLATFORM else {},
)
