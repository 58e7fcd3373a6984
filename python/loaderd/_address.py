"""What a user may pass as a daemon's address, parsed strictly.

    "HOST:PORT"           TCP, e.g. "127.0.0.1:50051", "[::1]:50051", "node3:50051"
    "unix:///ABS/PATH"    a Unix socket (gRPC's form); also "unix:/ABS/PATH",
                          "unix:REL/PATH" (from the working directory)
    "/ABS/PATH", "./REL"  a bare Unix socket path
    "unix-abstract:NAME"  a Linux abstract socket

A TCP address without a port, a URL (http://, https://, grpc://) and
anything else gRPC would silently resolve as a DNS name are refused with the
reason, rather than failing later as an opaque connection error.

A pool of daemons that serve the same datasets (parse_target; loaderd._pool
spreads a stream over them):

    "HOST:PORT,HOST:PORT"   a list; each entry any single address above
    "dns:///NAME:PORT"      every address NAME resolves to, looked up again
"""

import collections
import ipaddress
import os
import re
import socket
from typing import Any, List

Address = collections.namedtuple("Address", "text target unix_path")
Address.__doc__ = """A parsed address: text as given, target for grpc.insecure_channel,
unix_path the socket's absolute path (None for TCP and abstract sockets)."""

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_PORT = re.compile(r"^[0-9]{1,5}$")
_HOST = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$")


Pool = collections.namedtuple("Pool", "text members host port")
Pool.__doc__ = """A parsed pool target: members the listed Addresses (empty for a
DNS name), host and port the dns:/// name's (None for a list)."""


def _unix(text, path):
    if not path:
        raise ValueError(f"loaderd: address {text!r} names no socket path")
    path = os.path.abspath(os.path.expanduser(path))
    return Address(text, "unix:" + path, path)


def _port(text, port):
    if not _PORT.match(port) or not 1 <= int(port) <= 65535:
        raise ValueError(f"loaderd: address {text!r}: port {port!r} is not a number in 1..65535")


def parse(address):
    """Parse an address (see the module's doc) or raise ValueError saying
    what is wrong and what to write instead."""
    if isinstance(address, Address):
        return address
    if not isinstance(address, (str, os.PathLike)):
        raise TypeError(f"loaderd: address must be a string or a path, not {type(address).__name__}")
    text = os.fspath(address)
    a = text.strip()
    if not a:
        raise ValueError("loaderd: empty address; give HOST:PORT, unix:///PATH or a socket path")
    if "," in a:
        raise ValueError(f"loaderd: address {text!r} names several daemons (a pool); this call talks to one: "
                         "give one of them (loaderd.Dataset, list_datasets and sample_names take a pool)")
    m = _URL.match(a)
    if m and m.group(1).lower() != "unix":
        scheme = m.group(1).lower()
        rest = a[m.end():].rstrip("/")
        hint = f" (e.g. {rest!r})" if ":" in rest and "/" not in rest else ""
        if scheme in ("http", "https", "grpc", "grpcs", "h2", "h2c", "tcp"):
            raise ValueError(
                f"loaderd: address {text!r} is a URL, but loaderd is a gRPC server, not a web server: give "
                f"HOST:PORT{hint} or unix:///PATH (gRPC would otherwise look up a host named {scheme!r}); "
                "for TLS, give HOST:PORT with tls_ca= or tls=True (LOADERD_TLS_CA, LOADERD_TLS)")
        if scheme != "dns":
            raise ValueError(f"loaderd: address {text!r}: unknown scheme {scheme!r}; give HOST:PORT or unix:///PATH")
    low = a.lower()
    if low.startswith("unix://"):
        path = a[len("unix://"):]
        if not path.startswith("/"):
            raise ValueError(f"loaderd: address {text!r}: unix:// takes an absolute path, unix:///{path} "
                             "(three slashes), or use unix:RELATIVE/PATH")
        return _unix(text, path)
    if low.startswith("unix:"):
        return _unix(text, a[len("unix:"):])
    if low.startswith("unix-abstract:"):
        if len(a) == len("unix-abstract:"):
            raise ValueError(f"loaderd: address {text!r} names no abstract socket")
        return Address(text, a, None)
    if a.startswith(("/", "./", "../", "~")) or a in (".", ".."):
        return _unix(text, a)
    hostport = a
    prefix = ""
    for p in ("dns:///", "dns:"):
        if low.startswith(p):
            prefix, hostport = a[:len(p)], a[len(p):]
            break
    if hostport.startswith("["):  # [IPv6]:PORT
        host, sep, port = hostport[1:].partition("]")
        if not sep or not host:
            raise ValueError(f"loaderd: address {text!r}: unbalanced brackets; write [IPV6]:PORT")
        if not port.startswith(":"):
            raise ValueError(f"loaderd: address {text!r} has no port; a TCP address needs one: [{host}]:PORT")
        _port(text, port[1:])
        return Address(text, prefix + hostport, None)
    if hostport.count(":") > 1:
        raise ValueError(f"loaderd: address {text!r}: an IPv6 address goes in brackets: [ADDR]:PORT")
    host, sep, port = hostport.partition(":")
    if not sep:
        if os.path.exists(a):
            return _unix(text, a)
        raise ValueError(f"loaderd: address {text!r} has no port; a TCP address needs one, e.g. {host}:50051 "
                         "(or give unix:///PATH for a Unix socket)")
    if not host:
        raise ValueError(f"loaderd: address {text!r} has no host; write localhost:{port} or 127.0.0.1:{port}")
    if not _HOST.match(host):
        raise ValueError(f"loaderd: address {text!r}: {host!r} is not a host name or IP address")
    _port(text, port)
    return Address(text, prefix + hostport, None)


def loopback(target):
    """Whether a TCP target's host ("host:port", "[v6]:port",
    "dns:///host:port") is localhost or a loopback address."""
    for p in ("dns:///", "dns:"):
        if target.startswith(p):
            target = target[len(p):]
            break
    host = target[1:].partition("]")[0] if target.startswith("[") else target.rpartition(":")[0]
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_target(address):
    """A single daemon's Address (see parse), or a Pool for a comma-separated
    list or a dns:///NAME:PORT target; ValueError says what is wrong."""
    if isinstance(address, (Address, Pool)):
        return address
    if not isinstance(address, (str, os.PathLike)):
        raise TypeError(f"loaderd: address must be a string or a path, not {type(address).__name__}")
    text = os.fspath(address)
    a = text.strip()
    if a.lower().startswith("dns://"):
        _, sep, hostport = a[len("dns://"):].partition("/")  # an authority is ignored: the system resolver answers
        host, port = hostport, ""
        if hostport.startswith("["):
            host, _, port = hostport[1:].partition("]")
            port = port[1:] if port.startswith(":") else ""
        elif hostport.count(":") == 1:
            host, _, port = hostport.partition(":")
        if not sep or not host or not port or "," in hostport or not (_HOST.match(host) or ":" in host):
            raise ValueError(f"loaderd: pool address {text!r}: want dns:///NAME:PORT (every address NAME "
                             "resolves to is a daemon of the pool)")
        _port(text, port)
        return Pool(text, (), host, port)
    if "," not in a:
        return parse(address)
    members: List[Any] = []
    for item in a.split(","):
        item = item.strip()
        if not item:
            raise ValueError(f"loaderd: pool address {text!r} has an empty entry; write HOST:PORT,HOST:PORT")
        if item.lower().startswith("dns:"):
            raise ValueError(f"loaderd: pool address {text!r}: {item!r} is a name to resolve; give it alone "
                             "(dns:///NAME:PORT) or list HOST:PORT entries")
        try:
            m = parse(item)
        except ValueError as e:
            raise ValueError(f"loaderd: pool address {text!r}: {str(e).removeprefix('loaderd: ')}") from None
        if all(x.target != m.target for x in members):
            members.append(m)
    return Pool(text, tuple(members), None, None)


def resolve(pool):
    """The pool's member Addresses now: its list, or what its name resolves
    to (sorted). Raises OSError when the name does not resolve."""
    if pool.host is None:
        return list(pool.members)
    out = set()
    for family, _, _, _, sa in socket.getaddrinfo(pool.host, int(pool.port), type=socket.SOCK_STREAM):
        ip = sa[0]
        out.add(f"[{ip}]:{pool.port}" if family == socket.AF_INET6 else f"{ip}:{pool.port}")
    return [Address(t, t, None) for t in sorted(out)]
