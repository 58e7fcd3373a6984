"""TLS and bearer tokens for a daemon's secured TCP listener (`loaderd serve
--tls-cert/--tls-key`, `--tls-client-ca`, `--auth-tokens`), from arguments
or, where an argument is None, the environment:

    tls              LOADERD_TLS=1          TLS with the system's roots (implied by the next four)
    tls_ca           LOADERD_TLS_CA         PEM bundle the daemon's certificate must chain to
    tls_cert         LOADERD_TLS_CERT       client certificate (PEM), for --tls-client-ca
    tls_key          LOADERD_TLS_KEY        its private key
    tls_server_name  LOADERD_TLS_SERVER_NAME  name to check the daemon's certificate for
    token            LOADERD_TOKEN          bearer token, one of the daemon's --auth-tokens
    token_file       LOADERD_TOKEN_FILE     a file holding it, read at every call (a mounted secret)
    insecure         LOADERD_INSECURE=1     let a token cross plaintext to a non-loopback host

A Unix socket needs none of them and gets none. A token goes over
plaintext only to a loopback address unless insecure is set (a
--insecure-tcp daemon behind a service mesh that encrypts).
"""

import collections
import os

import grpc

from . import _address, _fork
from ._errors import Error

# Credentials' fields, in order (spelled out there too: mypy needs the literal)
FIELDS = ("tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "token", "token_file", "insecure")
_ENV = {f: "LOADERD_" + f.upper() for f in FIELDS}
_BOOLS = ("tls", "insecure")
_TRUE, _FALSE = ("1", "t", "true", "yes"), ("0", "f", "false", "no", "")

class Credentials(collections.namedtuple("Credentials", ["tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name",
                                                         "token", "token_file", "insecure"])):
    """What secures a channel to a daemon's TCP listener (see the module's doc)."""
    __slots__ = ()

    def __repr__(self):  # a log or a traceback must not show the token
        return super(Credentials, self._replace(token=self.token and "<hidden>")).__repr__()


assert Credentials._fields == FIELDS


def resolve(**kw):
    """Credentials from keyword arguments (FIELDS), each None taken from
    its environment variable."""
    unknown = set(kw) - set(FIELDS)
    if unknown:
        raise TypeError(f"loaderd: unknown credential arguments {sorted(unknown)}")
    out = {}
    for f in FIELDS:
        v = kw.get(f)
        if v is None:
            v = os.environ.get(_ENV[f]) or None
            if f in _BOOLS and v is not None:
                if v.lower() not in _TRUE + _FALSE:
                    raise ValueError(f"loaderd: {_ENV[f]}={v!r}: want 1 or 0")
                v = v.lower() in _TRUE
        elif f not in _BOOLS:
            v = os.fspath(v) if f != "token" else str(v)
        out[f] = bool(v) if f in _BOOLS else v
    return Credentials(**out)


def _read(path, what):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise Error(f"loaderd: {what} {path}: {e.strerror or e}") from None


class _Bearer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
              grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds "authorization: Bearer TOKEN" to every call. An interceptor
    rather than call credentials: gRPC sends those over TLS only, and a
    loopback daemon may take tokens in plaintext."""

    def __init__(self, token, token_file):
        self._tokenv, self._file = token, token_file

    def token(self):
        tok = self._tokenv
        if self._file:
            tok = _read(self._file, "token file").decode(errors="replace").strip()
        if not tok or any(c <= " " or c == "\x7f" for c in tok):
            # Never the token in the message: it may be a near miss of a real one.
            raise Error("loaderd: the token is empty or holds spaces or control characters")
        return tok

    def _details(self, d):
        md = list(d.metadata or ()) + [("authorization", "Bearer " + self.token())]
        return _CallDetails(d.method, d.timeout, md, d.credentials, getattr(d, "wait_for_ready", None),
                            getattr(d, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, requests):
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation, details, requests):
        return continuation(self._details(details), requests)


class _CallDetails(collections.namedtuple("_CallDetails", "method timeout metadata credentials wait_for_ready compression"),
                   grpc.ClientCallDetails):
    pass


def channel(address, creds, options):
    """A gRPC channel to a parsed address (_address.Address) with creds."""
    _fork.check()  # a child forked without gRPC's fork support: an Error now, not a hang
    if address.target.startswith("unix"):
        return grpc.insecure_channel(address.target, options=options)
    use_tls = creds.tls or any((creds.tls_ca, creds.tls_cert, creds.tls_key, creds.tls_server_name))
    if creds.token and creds.token_file:
        raise ValueError("loaderd: token and token_file (LOADERD_TOKEN and LOADERD_TOKEN_FILE) at once: give one")
    bearer = _Bearer(creds.token, creds.token_file) if creds.token or creds.token_file else None
    if bearer and not use_tls and not creds.insecure and not _address.loopback(address.target):
        raise ValueError(f"loaderd: a token to {address.text} would cross the network in the clear: give tls_ca "
                         "(LOADERD_TLS_CA) or tls=True (LOADERD_TLS=1) for a daemon serving TLS, or insecure=True "
                         "(LOADERD_INSECURE=1) behind something that encrypts")
    if bearer:
        bearer.token()  # a missing token file fails here, not at the first call
    if use_tls:
        if bool(creds.tls_cert) != bool(creds.tls_key):
            raise ValueError("loaderd: a client certificate needs its key and a key its certificate "
                             "(tls_cert and tls_key, LOADERD_TLS_CERT and LOADERD_TLS_KEY)")
        root = _read(creds.tls_ca, "TLS CA") if creds.tls_ca else None
        key = _read(creds.tls_key, "TLS key") if creds.tls_key else None
        chain = _read(creds.tls_cert, "TLS certificate") if creds.tls_cert else None
        opts = list(options)
        if creds.tls_server_name:
            opts.append(("grpc.ssl_target_name_override", creds.tls_server_name))
        ch = grpc.secure_channel(address.target, grpc.ssl_channel_credentials(root, key, chain), options=opts)
    else:
        ch = grpc.insecure_channel(address.target, options=options)
    return grpc.intercept_channel(ch, bearer) if bearer else ch
