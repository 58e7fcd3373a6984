"""fork() and gRPC.

gRPC's core does not survive fork(): a child of a process that had a
channel open inherits its polling descriptor and locks but none of its
threads, and hangs in its first RPC, past any timeout. gRPC's fork support
(GRPC_ENABLE_FORK_SUPPORT, read once, when grpc is first imported) makes
the child's gRPC work again: the parent's channels are closed in the child
and new ones work. It is the user's choice (see below why loaderd does not
turn it on). Its cost: a fork() while a stream is open waits (about 1 s)
for gRPC's polling thread to stop.

Without fork support, a child forked while a loaderd channel was open
cannot use gRPC: check() then raises an Error at once instead of letting
the first call hang. What the parent's objects held (streams, channels,
shared-memory maps, daemons started by loaderd.serve) is dropped in the
child by dataset._after_fork_in_child.
"""

import os
import sys

# Not turned on here: with fork support on, gRPC's child handler also runs in
# the fork of every subprocess started with preexec_fn (fork, then exec) and
# ends that child with exit status 64 when gRPC's core will not shut down in
# it ("Failed to shutdown gRPC Core after fork()"), which killed the test
# daemon's start in about 1 run in 4 here; and each fork waits ~1 s while a
# stream is open. Set GRPC_ENABLE_FORK_SUPPORT=1 before grpc is imported to
# use loaderd in forked children.

import grpc  # noqa: E402

from ._errors import Error  # noqa: E402

try:
    from grpc._cython import cygrpc as _cygrpc
except ImportError:  # pragma: no cover - a grpc without its Cython core
    _cygrpc = None

_pid = os.getpid()
_broken = None  # why gRPC cannot be used in this process, or None


def fork_support():
    """Whether gRPC's fork support is on in this process."""
    try:
        return bool(_cygrpc.is_fork_support_enabled())
    except Exception:
        return False


def forked(had_grpc):
    """Called in a forked child: had_grpc says whether the parent had a
    loaderd channel or stream open when it forked."""
    global _pid, _broken
    parent, _pid = _pid, os.getpid()
    if had_grpc and not fork_support() and _broken is None:
        _broken = (f"loaderd: this process (pid {_pid}) was forked from pid {parent} while it had a gRPC "
                   "channel open, and gRPC's fork support is off, so gRPC cannot work here (its first call "
                   "would hang). Set GRPC_ENABLE_FORK_SUPPORT=1 in the environment before grpc is "
                   "imported (gRPC's fork support), or start the process with "
                   "multiprocessing's 'spawn' or 'forkserver' method, or before opening any Dataset")


def check():
    """Raise the Error that says why gRPC cannot be used here, if it
    cannot (a child forked without gRPC's fork support)."""
    if _broken is not None:
        raise Error(_broken, grpc.StatusCode.FAILED_PRECONDITION)
