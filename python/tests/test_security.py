"""The Python client against a daemon whose TCP listener serves TLS 1.3,
wants client certificates and bearer tokens (docs/DEPLOY.md, "Security on
TCP"). The certificates are made here with the openssl command, which
Debian's ca-certificates (a dependency of python3-pip) brings."""

import shutil
import subprocess

import grpc
import pytest

import loaderd
from conftest import Daemon

TOK_ALL = "python-test-token-all-0001"
TOK_T = "python-test-token-t-only-02"


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _issue(d, name, ca, ext):
    """A P-256 key and a certificate signed by ca (a name in d) with ext."""
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    (d / f"{name}.ext").write_text(ext + "\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-set_serial", "7",
             "-days", "1", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)


def _ca(d, name):
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
             f"{name}.key", "-out", f"{name}.crt", "-days", "1", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign", cwd=d)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is missing (Debian: apt-get install openssl; scripts/python-setup.sh brings it)")
    d = tmp_path_factory.mktemp("certs")
    _ca(d, "ca")
    _ca(d, "other")
    _issue(d, "server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth")
    _issue(d, "client", "ca", "extendedKeyUsage=clientAuth")
    _issue(d, "stranger", "other", "extendedKeyUsage=clientAuth")
    (d / "tokens").write_text(f"# test tokens\n{TOK_ALL} datasets=*\n{TOK_T} datasets=t streams=1\n")
    (d / "token").write_text(TOK_ALL + "\n")
    return d


@pytest.fixture(scope="module")
def secure(binary, certs, tmp_path_factory):
    d = Daemon(binary, tmp_path_factory.mktemp("secure"), {"s": "synthetic:256", "t": "synthetic:64"},
               args=["--tls-cert", certs / "server.crt", "--tls-key", certs / "server.key",
                     "--tls-client-ca", certs / "ca.crt", "--auth-tokens", certs / "tokens"])
    d.start()  # ready when its Unix socket answers: that needs neither
    yield d
    d.stop()
    log = open(d.log.name, "rb").read().decode(errors="replace")
    assert TOK_ALL not in log and TOK_T not in log, "the daemon's log shows a token"


def _tls(certs, **kw):
    kw.setdefault("tls_ca", certs / "ca.crt")
    kw.setdefault("tls_cert", certs / "client.crt")
    kw.setdefault("tls_key", certs / "client.key")
    return kw


def test_stream_over_tls_with_a_token(secure, certs):
    with loaderd.Dataset(secure.tcp, "s", 64, transport="inline", **_tls(certs, token=TOK_ALL)) as ds:
        n = sum(len(labels) for _, labels in ds)
    assert n == 256


def test_credentials_from_the_environment(secure, certs, monkeypatch):
    monkeypatch.setenv("LOADERD_TLS_CA", str(certs / "ca.crt"))
    monkeypatch.setenv("LOADERD_TLS_CERT", str(certs / "client.crt"))
    monkeypatch.setenv("LOADERD_TLS_KEY", str(certs / "client.key"))
    monkeypatch.setenv("LOADERD_TOKEN", TOK_T)
    assert [d.name for d in loaderd.list_datasets(secure.tcp)] == ["t"]  # only the token's datasets
    monkeypatch.delenv("LOADERD_TOKEN")
    monkeypatch.setenv("LOADERD_TOKEN_FILE", str(certs / "token"))
    assert [d.name for d in loaderd.list_datasets(secure.tcp)] == ["s", "t"]
    # The Unix socket needs none of it, and is given none.
    assert [d.name for d in loaderd.list_datasets(secure.address)] == ["s", "t"]


@pytest.mark.parametrize("kw, code, msg", [
    ({"token": None}, grpc.StatusCode.UNAUTHENTICATED, "needs a bearer token"),
    ({"token": "not-a-token-of-the-daemon"}, grpc.StatusCode.UNAUTHENTICATED, "unknown bearer token"),
    ({"token": TOK_ALL, "tls_cert": None, "tls_key": None}, grpc.StatusCode.UNAUTHENTICATED, "needs a client certificate"),
    ({"token": TOK_ALL, "tls_cert": "stranger.crt", "tls_key": "stranger.key"}, grpc.StatusCode.UNAUTHENTICATED,
     "signed by unknown authority"),
])
def test_refusals(secure, certs, monkeypatch, kw, code, msg):
    for v in ("LOADERD_TOKEN", "LOADERD_TOKEN_FILE"):
        monkeypatch.delenv(v, raising=False)
    kw = {k: (certs / v if isinstance(v, str) and v.endswith((".crt", ".key")) else v) for k, v in kw.items()}
    with pytest.raises(loaderd.Error, match=msg) as e:
        loaderd.list_datasets(secure.tcp, connect_timeout=0, **_tls(certs, **kw))
    assert e.value.code == code


def test_a_dataset_the_token_may_not_open(secure, certs):
    with pytest.raises(loaderd.Error, match=r'may not open dataset "s" \(it may open: t\)') as e:
        loaderd.sample_names(secure.tcp, "s", count=1, **_tls(certs, token=TOK_T))
    assert e.value.code == grpc.StatusCode.PERMISSION_DENIED
    ds = loaderd.Dataset(secure.tcp, "s", 8, transport="inline", connect_timeout=0, **_tls(certs, token=TOK_T))
    with pytest.raises(loaderd.Error, match=r"unknown dataset 's'.*registered this token may open: t"):
        next(iter(ds))
    ds.close()


def test_a_client_that_does_not_trust_the_daemons_ca(secure, certs):
    with pytest.raises(loaderd.UnreachableError, match="TLS handshake failed"):
        loaderd.list_datasets(secure.tcp, connect_timeout=0, **_tls(certs, tls_ca=certs / "other.crt", token=TOK_ALL))


def test_a_token_is_not_sent_in_the_clear(monkeypatch):
    monkeypatch.delenv("LOADERD_INSECURE", raising=False)
    with pytest.raises(ValueError, match="would cross the network in the clear"):
        loaderd.list_datasets("node3.invalid:50051", token=TOK_ALL, connect_timeout=0)
    monkeypatch.setenv("LOADERD_TLS", "maybe")
    with pytest.raises(ValueError, match="LOADERD_TLS='maybe'"):
        loaderd.list_datasets("node3.invalid:50051", token=TOK_ALL)
