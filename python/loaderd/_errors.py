"""Errors raised by the loaderd client."""


class Error(Exception):
    """A loaderd failure. code is the grpc.StatusCode when the daemon (or
    the transport) reported one, else None."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


class ProtocolError(Error):
    """The daemon broke the wire protocol (a bug on one side)."""


def from_rpc(err, what):
    """Wrap a grpc.RpcError as an Error that keeps its status code."""
    code = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else str(err)
    name = code.name if code is not None else "UNKNOWN"
    return Error(f"loaderd: {what}: {name}: {details}", code)
