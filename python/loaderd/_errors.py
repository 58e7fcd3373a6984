"""Errors raised by the loaderd client, worded to say what to do."""

import os
import stat

import grpc

from . import _address


class Error(Exception):
    """A loaderd failure. code is the grpc.StatusCode when the daemon (or
    the transport) reported one, else None."""

    def __init__(self, message, code=None, status=None):
        super().__init__(message)
        self.code = code
        self.status = status  # "CODE: details" as gRPC reported it, if it did


class ProtocolError(Error):
    """The daemon broke the wire protocol (a bug on one side)."""


class UnreachableError(Error):
    """No loaderd answers at the address (code UNAVAILABLE or
    DEADLINE_EXCEEDED): not started, already stopped, or another address."""


def _socket_state(path):
    """Why a Unix socket path may not answer, in words (or "")."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        d = os.path.dirname(path) or "."
        if not os.path.isdir(d):
            return f"directory {d} does not exist"
        return f"no socket at {path}"
    except PermissionError:
        return f"permission denied on {path}"
    except OSError as e:
        return f"{path}: {e.strerror}"
    if not stat.S_ISSOCK(st.st_mode):
        return f"{path} is not a socket"
    if not os.access(path, os.R_OK | os.W_OK):
        return f"{path} exists but this user may not connect to it (mode {stat.S_IMODE(st.st_mode):o})"
    return f"a socket exists at {path} but nothing answers (a daemon that died, or is still starting)"


def unreachable(address, waited=None, status=None):
    """The error for a daemon that cannot be reached at address (an
    _address.Address)."""
    how = f" within {waited:g} s" if waited else ""
    where = address.text
    why = _socket_state(address.unix_path) if address.unix_path else ""
    if address.unix_path:
        start = f"`loaderd serve --unix {address.unix_path} --dataset NAME=FORMAT:PATH`"
    else:
        # A daemon refuses plaintext on an address other than loopback.
        tls = "" if _address.loopback(address.target) else " --tls-cert CERT --tls-key KEY"
        start = f"`loaderd serve --listen {address.target}{tls} --dataset NAME=FORMAT:PATH`"
    msg = (f"loaderd: cannot reach loaderd at {where}{how} — is `loaderd serve` running? "
           f"Start one with {start}, or from Python with loaderd.serve(...)")
    if why:
        msg += f"; {why}"
    if status and any(s in status for s in ("handshake", "SSL", "CERTIFICATE")):
        msg += ("; the TLS handshake failed: check tls_ca (LOADERD_TLS_CA) and tls_server_name against the "
                "daemon's certificate, and whether it serves TLS at all")
    if not waited:
        msg += "; pass connect_timeout=SECONDS to wait for a daemon that is still starting"
    if status:
        msg += f" (gRPC: {status})"
    return UnreachableError(msg, grpc.StatusCode.UNAVAILABLE, status)


def _status(err):
    code = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else str(err)
    return code, f"{code.name if code is not None else 'UNKNOWN'}: {details}"


def is_unreachable(err):
    """Whether a grpc.RpcError means nobody answered (rather than the daemon
    answering with an error of its own, which starts with "loaderd:")."""
    code, _ = _status(err)
    details = (err.details() if hasattr(err, "details") else "") or ""
    if details.startswith("loaderd"):
        return False
    return code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def from_rpc(err, what, address=None, waited=None):
    """Wrap a grpc.RpcError as an Error that keeps its status code; a daemon
    that cannot be reached gets the error that says so."""
    code, text = _status(err)
    if address is not None and is_unreachable(err):
        return unreachable(address, waited, text)
    return Error(f"loaderd: {what}: {text}", code, text)
