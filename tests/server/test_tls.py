"""TLS as Redis 6/7 serve it: the tls-* parameters, the ecosystem's clients, bad peers,
certificate reloads and replication over TLS, side by side with redis-server.

Certificates come from the ``openssl`` command (.ci/run installs it), made once per
session: a CA, a server certificate, a client certificate, one signed by another CA
(untrusted), an encrypted key, and DH parameters.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio

from tests.support import (
    ServerProcess,
    free_port,
    require_tool,
    scratch_dir,
    wait_until,
)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=120)


def _make_ca(d: Path, name: str) -> None:
    _openssl("req", "-x509", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "3650", "-subj", f"/O=rill test/CN={name}",
             cwd=d)


def _make_cert(d: Path, name: str, ca: str, key_args: tuple[str, ...] = ("-nodes",)) -> None:
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", *key_args,
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/O=rill test/CN={name}", cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", "365", "-out", f"{name}.crt", cwd=d)


@pytest.fixture(scope="session")
def certs() -> Path:
    require_tool("openssl")
    d = Path(scratch_dir("rill-tls-certs-"))
    _make_ca(d, "ca")
    _make_ca(d, "otherca")
    _make_cert(d, "server", "ca")
    _make_cert(d, "client", "ca")
    _make_cert(d, "server2", "ca")
    _make_cert(d, "stranger", "otherca")
    _make_cert(d, "locked", "ca", ("-passout", "pass:s3cret"))
    _openssl("dhparam", "-dsaparam", "-out", "dh.pem", "2048", cwd=d)
    cadir = d / "cadir"  # tls-ca-cert-dir: the CA under its hash name
    cadir.mkdir()
    (cadir / "ca.pem").write_bytes((d / "ca.crt").read_bytes())
    _openssl("rehash", str(cadir), cwd=d)
    return d


def client_context(certs: Path, cert: str | None = "client", ca: str = "ca", **kw) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(str(certs / f"{ca}.crt"))
    if cert is not None:
        ctx.load_cert_chain(str(certs / f"{cert}.crt"), str(certs / f"{cert}.key"))
    for k, v in kw.items():
        setattr(ctx, k, v)
    return ctx


def tls_args(certs: Path, cert: str = "server") -> list[str]:
    return ["--tls-cert-file", str(certs / f"{cert}.crt"), "--tls-key-file", str(certs / f"{cert}.key"),
            "--tls-ca-cert-file", str(certs / "ca.crt")]


class TLSServer(ServerProcess):
    """A server with a TLS port (and a plain one unless ``plain`` is off); ready once it
    answers PING over TLS."""

    def __init__(self, argv: list[str], port: int, tls_port: int, workdir: str, ctx: ssl.SSLContext) -> None:
        super().__init__(argv, port, workdir)
        self.tls_port = tls_port
        self.ctx = ctx

    def start(self, timeout: float = 20.0) -> TLSServer:
        log = open(self.logfile, "ab")
        self.proc = subprocess.Popen(self.argv, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log()}")
            try:
                with tls_connect(self.tls_port, self.ctx, timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64):
                        return self
            except (OSError, ssl.SSLError):
                time.sleep(0.05)
        raise RuntimeError(f"server did not start: {self.log()}")


def tls_connect(port: int, ctx: ssl.SSLContext, timeout: float = 10.0, **kw) -> ssl.SSLSocket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return ctx.wrap_socket(sock, **kw)


def start_tls(kind: str, certs: Path, *args: str, plain: bool = True, workdir: str | None = None,
              ctx: ssl.SSLContext | None = None) -> TLSServer:
    """rill or redis-server with TLS on a free port, mutual TLS by default (as Redis);
    ``ctx`` is what the readiness check connects with (default: our CA, client.crt)."""
    port, tls_port = free_port(), free_port()
    workdir = workdir or scratch_dir(f"{kind}-tls-")
    if kind == "rill":
        argv = [sys.executable, "-m", "rill.server.main"]
    else:
        argv = [require_tool("redis-server"), "--appendonly", "no"]
    argv += ["--port", str(port if plain else 0), "--tls-port", str(tls_port), *tls_args(certs),
             "--save", "", "--dir", workdir, "--enable-debug-command", "yes", *args]
    return TLSServer(argv, port, tls_port, workdir, ctx or client_context(certs)).start()


def both(certs: Path, *args: str, plain: bool = True):
    """A rill and a redis-server, each with the same TLS arguments."""
    return [start_tls(kind, certs, *args, plain=plain) for kind in ("rill", "redis")]


class TLSClient:
    """Exact reply bytes over TLS (the RawClient of tests.support, on an SSL socket)."""

    def __init__(self, port: int, ctx: ssl.SSLContext) -> None:
        from tests.support import RawClient

        self.raw = RawClient.__new__(RawClient)
        self.raw.sock = tls_connect(port, ctx)
        self.raw.buf = b""

    def call(self, *args) -> bytes:
        return self.raw.call(*args)

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> TLSClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def redis_cli(port: int, certs: Path, *args: str, cert: str | None = "client") -> subprocess.CompletedProcess:
    cli = require_tool("redis-cli")
    tls = ["--tls", "--cacert", str(certs / "ca.crt")]
    if cert:
        tls += ["--cert", str(certs / f"{cert}.crt"), "--key", str(certs / f"{cert}.key")]
    return subprocess.run([cli, "-p", str(port), *tls, *args], capture_output=True, text=True, timeout=30)


# -- the ecosystem's clients ---------------------------------------------------------------


def test_redis_cli_over_tls_side_by_side(certs):
    outs = []
    for srv in both(certs, plain=False):
        with srv:
            script = [("SET", "k", "v"), ("GET", "k"), ("XADD", "s", "1-1", "f", "v"), ("XLEN", "s"),
                      ("INCR", "n"), ("CONFIG", "GET", "tls-port")]
            outs.append([redis_cli(srv.tls_port, certs, *cmd).stdout.replace(str(srv.tls_port), "PORT")
                         for cmd in script])
    assert outs[0] == outs[1]
    assert outs[0][1] == "v\n"


def test_redis_py_sync_and_asyncio(certs):
    with start_tls("rill", certs, plain=False) as srv:
        kw = dict(host="127.0.0.1", port=srv.tls_port, ssl=True, ssl_ca_certs=str(certs / "ca.crt"),
                  ssl_certfile=str(certs / "client.crt"), ssl_keyfile=str(certs / "client.key"),
                  ssl_check_hostname=False)
        r = redis.Redis(**kw)
        assert r.ping() is True
        r.set("a", "1")
        assert r.xadd("s", {"f": "v"}, id="1-1") == b"1-1"
        pipe = r.pipeline()
        for _ in range(200):
            pipe.incr("n")
        assert pipe.execute()[-1] == 200
        assert r.get("x" * 10) is None
        r.close()

        async def main() -> list:
            a = redis.asyncio.Redis(**kw)
            try:
                await a.set("b", "2")
                got = [await a.get("a"), await a.get("b"), await a.xlen("s")]
                # A blocked read over TLS, served by another TLS client.
                waiter = asyncio.ensure_future(a.blpop(["q"], timeout=5))
                other = redis.asyncio.Redis(**kw)
                await asyncio.sleep(0.2)
                await other.rpush("q", "x")
                got.append(await waiter)
                await other.aclose()
                return got
            finally:
                await a.aclose()

        assert asyncio.run(main()) == [b"1", b"2", 1, (b"q", b"x")]


def test_redis_benchmark_over_tls(certs):
    bench = require_tool("redis-benchmark")
    with start_tls("rill", certs, plain=False) as srv:
        out = subprocess.run(
            [bench, "-p", str(srv.tls_port), "--tls", "--cacert", str(certs / "ca.crt"),
             "--cert", str(certs / "client.crt"), "--key", str(certs / "client.key"),
             "-n", "2000", "-c", "4", "-t", "set,get", "-q", "-P", "4"],
            capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "SET:" in out.stdout and "GET:" in out.stdout
        with TLSClient(srv.tls_port, srv.ctx) as c:
            assert c.call("DBSIZE") != b":0\r\n"


def _py(srv: TLSServer, certs: Path, **kw) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=srv.tls_port, ssl=True, ssl_ca_certs=str(certs / "ca.crt"),
                       ssl_certfile=str(certs / "client.crt"), ssl_keyfile=str(certs / "client.key"),
                       ssl_check_hostname=False, **kw)


# -- start-up errors -----------------------------------------------------------------------


def _startup_failure(kind: str, certs: Path, *args: str) -> tuple[int, list[str]]:
    """Exit status and the last two log lines (pid and time stripped) of a server that
    refuses to start."""
    workdir = scratch_dir(f"{kind}-tls-bad-")
    binary = [sys.executable, "-m", "rill.server.main"] if kind == "rill" else [require_tool("redis-server")]
    argv = [*binary, "--port", "0", "--tls-port", str(free_port()), "--save", "", "--dir", workdir, *args]
    proc = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=60)
    lines = [line.split(" ", 5)[-1] for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, lines[-2:]


@pytest.mark.parametrize("case", [
    "missing cert", "cert is not a certificate", "key does not match", "missing key",
    "no CA", "missing CA", "bad protocols", "bad ciphers", "bad ciphersuites",
    "missing dh params", "bad dh params", "wrong key passphrase", "no cert",
])
def test_startup_refuses_bad_tls_configuration_as_redis(certs, case):
    c = {k: str(certs / v) for k, v in dict(cert="server.crt", key="server.key", ca="ca.crt").items()}
    args = {
        "missing cert": dict(cert="/nonexistent.crt"),
        "cert is not a certificate": dict(cert=str(certs / "server.key")),
        "key does not match": dict(key=str(certs / "client.key")),
        "missing key": dict(key="/nonexistent.key"),
        "no CA": dict(ca=""),
        "missing CA": dict(ca="/nonexistent-ca.crt"),
        "bad protocols": dict(extra=["--tls-protocols", "TLSv1.2 TLSv9"]),
        "bad ciphers": dict(extra=["--tls-ciphers", "NOT-A-CIPHER"]),
        "bad ciphersuites": dict(extra=["--tls-ciphersuites", "TLS_NOT_A_SUITE"]),
        "missing dh params": dict(extra=["--tls-dh-params-file", "/nonexistent.dh"]),
        "bad dh params": dict(extra=["--tls-dh-params-file", str(certs / "ca.crt")]),
        "wrong key passphrase": dict(cert=str(certs / "locked.crt"), key=str(certs / "locked.key"),
                                     extra=["--tls-key-file-pass", "wrong"]),
        "no cert": dict(cert=""),
    }[case]
    c.update({k: v for k, v in args.items() if k != "extra"})
    argv = ["--tls-cert-file", c["cert"], "--tls-key-file", c["key"], "--tls-ca-cert-file", c["ca"],
            *args.get("extra", [])]
    rill = _startup_failure("rill", certs, *argv)
    redis_ = _startup_failure("redis", certs, *argv)
    assert rill == redis_
    assert rill[0] == 1 and rill[1][-1] == "# Failed to configure TLS. Check logs for more info."


def test_encrypted_key_with_its_passphrase(certs):
    with start_tls("rill", certs, "--tls-cert-file", str(certs / "locked.crt"),
                   "--tls-key-file", str(certs / "locked.key"), "--tls-key-file-pass", "s3cret") as srv:
        with tls_connect(srv.tls_port, srv.ctx) as s:
            assert s.getpeercert()["subject"][1][0][1] == "locked"


# -- hostile and confused peers ------------------------------------------------------------


def test_plaintext_garbage_and_stalled_handshakes_leave_other_clients_untouched(certs):
    with start_tls("rill", certs) as srv:
        good = TLSClient(srv.tls_port, srv.ctx)
        assert good.call("SET", "k", "v") == b"+OK\r\n"
        stalled = [socket.create_connection(("127.0.0.1", srv.tls_port)) for _ in range(3)]
        stalled[1].sendall(b"\x16\x03\x01\x02\x00")  # a record header, then nothing
        for payload in (b"*1\r\n$4\r\nPING\r\n", b"PING\r\n", b"GET / HTTP/1.1\r\n\r\n",
                        os.urandom(4096), b"\x16\x03\x01\x00\x05hello"):
            s = socket.create_connection(("127.0.0.1", srv.tls_port), timeout=5)
            s.sendall(payload)
            t = time.monotonic()
            try:
                assert s.recv(100) in (b"", b"\x15\x03\x03\x00\x02\x02\n", b"\x15\x03\x01\x00\x02\x02\n")
            except ConnectionResetError:
                pass
            assert time.monotonic() - t < 3, "dropped at once, not after a timeout"
            s.close()
        # Meanwhile the stalled handshakes block nobody.
        assert good.call("GET", "k") == b"$1\r\nv\r\n"
        with TLSClient(srv.tls_port, srv.ctx) as fresh:
            assert fresh.call("PING") == b"+PONG\r\n"
        # A TLS client on the plain port: its hello is a protocol error there, as in Redis.
        with pytest.raises((ssl.SSLError, OSError)):
            tls_connect(srv.port, srv.ctx, timeout=5)
        plain = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        plain.sendall(b"PING\r\n")
        assert plain.recv(100) == b"+PONG\r\n"
        plain.close()
        # A stalled handshake is dropped in the end.
        stalled[0].settimeout(30)
        assert stalled[0].recv(10) == b""
        for s in stalled:
            s.close()
        assert good.call("DBSIZE") == b":1\r\n"
        good.close()


# -- client authentication, protocols, ciphers, sessions -------------------------------------


def _outcome(port: int, ctx: ssl.SSLContext) -> str:
    """What a client with ``ctx`` gets: PONG, or refused (at the handshake or, in TLS 1.3,
    at the first read, where a server refusing the certificate closes)."""
    try:
        with tls_connect(port, ctx, timeout=5) as s:
            s.sendall(b"PING\r\n")
            data = s.recv(100)
            return data.decode() if data else "refused"
    except (ssl.SSLError, OSError):
        return "refused"


@pytest.mark.parametrize("mode", ["yes", "no", "optional"])
def test_tls_auth_clients_side_by_side(certs, mode):
    results = []
    for srv in both(certs, "--tls-auth-clients", mode):
        with srv:
            results.append({who: _outcome(srv.tls_port, client_context(certs, cert))
                            for who, cert in (("client", "client"), ("none", None), ("stranger", "stranger"))})
    assert results[0] == results[1]
    assert results[0]["client"] == "+PONG\r\n"
    assert results[0]["none"] == ("refused" if mode == "yes" else "+PONG\r\n")


def test_tls_auth_clients_changes_for_new_connections(certs):
    with start_tls("rill", certs) as srv:
        assert _outcome(srv.tls_port, client_context(certs, None)) == "refused"
        with TLSClient(srv.tls_port, srv.ctx) as c:
            assert c.call("CONFIG", "SET", "tls-auth-clients", "no") == b"+OK\r\n"
        assert _outcome(srv.tls_port, client_context(certs, None)) == "+PONG\r\n"


def _negotiated(port: int, ctx: ssl.SSLContext) -> tuple | str:
    try:
        with tls_connect(port, ctx, timeout=5) as s:
            s.sendall(b"PING\r\n")
            s.recv(100)
            return s.version(), s.cipher()[0]
    except (ssl.SSLError, OSError):
        return "refused"


def _pinned(certs: Path, version: ssl.TLSVersion, **kw) -> ssl.SSLContext:
    return client_context(certs, minimum_version=version, maximum_version=version, **kw)


def test_protocols_ciphers_and_ciphersuites_side_by_side(certs):
    v12, v13 = ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3
    cases = [
        (["--tls-protocols", "TLSv1.2"], [_pinned(certs, v12), _pinned(certs, v13)]),
        (["--tls-protocols", "TLSv1.3"], [_pinned(certs, v12), _pinned(certs, v13)]),
        (["--tls-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"], [_pinned(certs, v13)]),
        (["--tls-ciphers", "ECDHE-ECDSA-CHACHA20-POLY1305"], [_pinned(certs, v12)]),
    ]
    # The client offers AES128 first; the server's list puts CHACHA20 first.
    offers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-CHACHA20-POLY1305"
    server_order = "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256"
    for prefer in ("yes", "no"):
        ctx = _pinned(certs, v12)
        ctx.set_ciphers(offers)
        cases.append((["--tls-ciphers", server_order, "--tls-prefer-server-ciphers", prefer], [ctx]))
    for args, clients in cases:
        got = []
        for srv in both(certs, *args):
            with srv:
                got.append([_negotiated(srv.tls_port, ctx) for ctx in clients])
        assert got[0] == got[1], args
    assert got[0] == [("TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")]  # prefer no: the client's choice


def _resumed(port: int, ctx: ssl.SSLContext) -> bool:
    with tls_connect(port, ctx) as s:
        s.sendall(b"PING\r\n")
        s.recv(100)  # TLS 1.3 tickets come after the handshake
        session = s.session
    with tls_connect(port, ctx, session=session) as s:
        s.sendall(b"PING\r\n")
        s.recv(100)
        return s.session_reused


@pytest.mark.parametrize("args", [[], ["--tls-session-cache-timeout", "0"], ["--tls-protocols", "TLSv1.2"]])
def test_session_resumption_side_by_side(certs, args):
    got = []
    for srv in both(certs, *args):
        with srv:
            got.append([_resumed(srv.tls_port, client_context(certs)) for _ in range(2)])
    assert got[0] == got[1]


@pytest.mark.parametrize("protocols", ["", "TLSv1.2"])
def test_session_caching_off_means_full_handshakes(certs, protocols):
    """tls-session-caching no: nothing resumes. (Redis 7.0 answers a resumption
    attempt with an internal-error alert there, its TLS 1.3 tickets still being
    issued; rill issues none, so a client simply makes a full handshake.)"""
    with start_tls("rill", certs, "--tls-session-caching", "no", "--tls-protocols", protocols) as srv:
        assert [_resumed(srv.tls_port, client_context(certs)) for _ in range(2)] == [False, False]


def test_session_cache_parameters_reach_openssl(certs):
    """tls-session-cache-size and -timeout land in the server context's OpenSSL cache."""
    from rill.server.config import Config
    from rill.server.tls import build_contexts, session_cache_settings

    config = Config()
    for name, value in (("tls-cert-file", certs / "server.crt"), ("tls-key-file", certs / "server.key"),
                        ("tls-ca-cert-file", certs / "ca.crt"), ("tls-session-cache-size", 77),
                        ("tls-session-cache-timeout", 9)):
        config.set(name, str(value), startup=True)
    server, _client = build_contexts(config)
    assert session_cache_settings(server) == (77, 9)


# -- certificate reload ----------------------------------------------------------------------


def _server_cn(port: int, ctx: ssl.SSLContext) -> str:
    with tls_connect(port, ctx) as s:
        return dict(x[0] for x in s.getpeercert()["subject"])["commonName"]


def test_certificates_reload_through_config_set(certs, tmp_path):
    live_crt, live_key = tmp_path / "live.crt", tmp_path / "live.key"
    live_crt.write_bytes((certs / "server.crt").read_bytes())
    live_key.write_bytes((certs / "server.key").read_bytes())
    refusals = []
    for kind in ("rill", "redis"):
        with start_tls(kind, certs, "--tls-cert-file", str(live_crt), "--tls-key-file", str(live_key)) as srv:
            old = TLSClient(srv.tls_port, srv.ctx)
            assert _server_cn(srv.tls_port, srv.ctx) == "server"
            # Another certificate by name: new connections get it, open ones carry on.
            assert old.call("CONFIG", "SET", "tls-cert-file", str(certs / "server2.crt"),
                            "tls-key-file", str(certs / "server2.key")) == b"+OK\r\n"
            assert _server_cn(srv.tls_port, srv.ctx) == "server2"
            assert old.call("PING") == b"+PONG\r\n"
            # A bad file is refused, and the current certificate stays.
            refusals.append([old.call("CONFIG", "SET", "tls-cert-file", str(tmp_path / "missing.crt")),
                             old.call("CONFIG", "SET", "tls-key-file", str(certs / "client.key")),
                             old.call("CONFIG", "SET", "tls-protocols", "SSLv3"),
                             old.call("CONFIG", "GET", "tls-cert-file")])
            assert _server_cn(srv.tls_port, srv.ctx) == "server2"
            # The same names again, after the files were replaced: reloaded (a rotation).
            assert old.call("CONFIG", "SET", "tls-cert-file", str(live_crt), "tls-key-file", str(live_key)) == b"+OK\r\n"
            assert _server_cn(srv.tls_port, srv.ctx) == "server"
            live_crt.write_bytes((certs / "server2.crt").read_bytes())
            live_key.write_bytes((certs / "server2.key").read_bytes())
            assert old.call("CONFIG", "SET", "tls-cert-file", str(live_crt)) == b"+OK\r\n"
            assert _server_cn(srv.tls_port, srv.ctx) == "server2"
            live_crt.write_bytes((certs / "server.crt").read_bytes())
            live_key.write_bytes((certs / "server.key").read_bytes())
            old.close()
    assert refusals[0] == refusals[1]
    assert refusals[0][0] == (b"-ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - "
                              b"Unable to update TLS configuration. Check server logs.\r\n")


def test_config_set_tls_port_turns_tls_on(certs):
    with start_tls("rill", certs) as srv:
        srv2_port = free_port()
        plain = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        from tests.support import encode_command

        plain.sendall(encode_command(["CONFIG", "SET", "tls-port", str(srv2_port)]))
        assert plain.recv(100) == b"+OK\r\n"
        wait_until(lambda: _outcome(srv2_port, srv.ctx) == "+PONG\r\n")
        assert _outcome(srv.tls_port, srv.ctx) == "refused"  # the old TLS port is closed
        plain.close()


def test_ca_cert_dir_and_dh_params(certs):
    with start_tls("rill", certs, "--tls-ca-cert-file", "", "--tls-ca-cert-dir", str(certs / "cadir"),
                   "--tls-dh-params-file", str(certs / "dh.pem")) as srv:
        assert _outcome(srv.tls_port, client_context(certs)) == "+PONG\r\n"
        assert _outcome(srv.tls_port, client_context(certs, "stranger")) == "refused"


# -- CLIENT LIST and INFO ----------------------------------------------------------------------


def test_client_list_and_info_show_tls_connections_as_redis(certs):
    seen = []
    for srv in both(certs, plain=False):
        with srv, TLSClient(srv.tls_port, srv.ctx) as c:
            info = c.call("INFO", "server").decode()
            port_line = next(line for line in info.split("\r\n") if line.startswith("tcp_port:"))
            entry = c.call("CLIENT", "LIST").decode().split("\r\n", 1)[1].strip()
            fields = dict(kv.split("=", 1) for kv in entry.split(" "))
            seen.append((port_line == f"tcp_port:{srv.tls_port}", fields["flags"],
                         fields["laddr"] == f"127.0.0.1:{srv.tls_port}", sorted(fields)))
    assert seen[0][:3] == seen[1][:3] == (True, "N", True)
    assert seen[0][3] == seen[1][3]


def test_large_values_and_long_pipelines_over_tls_side_by_side(certs):
    """Requests spread over many TLS records and many records in one read, and a reply
    larger than the socket buffers, arrive whole and in order, as from redis-server."""
    from tests.support import encode_command

    big = os.urandom(3 << 20)
    seen = []
    for srv in both(certs, plain=False):
        with srv, TLSClient(srv.tls_port, srv.ctx) as c:
            assert c.call("SET", "big", big) == b"+OK\r\n"
            assert c.call("GET", "big") == b"$%d\r\n%s\r\n" % (len(big), big)
            n = 2000
            c.raw.sock.sendall(b"".join(encode_command(["INCR", "n"]) for _ in range(n)))
            replies = [c.raw.read_reply() for _ in range(n)]
            seen.append((replies[0], replies[-1], c.call("STRLEN", "big")))
    assert seen[0] == seen[1] == (b":1\r\n", b":2000\r\n", b":%d\r\n" % len(big))


def _stats(c) -> dict[str, str]:
    text = c.call("INFO").decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line and not line.startswith("$"))


def _tls_entries(c, tls_port: int) -> list[dict[str, str]]:
    lines = c.call("CLIENT", "LIST").decode().split("\r\n", 1)[1].strip().splitlines()
    entries = [dict(kv.split("=", 1) for kv in line.split(" ")) for line in lines]
    return [e for e in entries if e["laddr"].endswith(f":{tls_port}")]


def test_connections_count_as_clients_from_accept_side_by_side(certs):
    """A TLS connection is a client from accept, its handshake still to come: it counts
    in connected_clients and shows in CLIENT LIST (cmd=NULL), and CLIENT KILL ends it;
    total_connections_received counts it only once its handshake is done (as Redis)."""
    from tests.support import RawClient

    seen = []
    for srv in both(certs):
        with srv:
            c = RawClient(srv.port)
            base = _stats(c)
            idle = [socket.create_connection(("127.0.0.1", srv.tls_port), timeout=10) for _ in range(3)]
            wait_until(lambda c=c, base=base: int(_stats(c)["connected_clients"]) == int(base["connected_clients"]) + 3)
            mid = _stats(c)
            entries = _tls_entries(c, srv.tls_port)
            with TLSClient(srv.tls_port, srv.ctx) as done:
                assert done.call("PING") == b"+PONG\r\n"
                after = _stats(c)
                assert c.call("CLIENT", "KILL", "ID", entries[0]["id"]) == b":1\r\n"
                idle[0].settimeout(10)
                assert idle[0].recv(10) == b""
                killed = _stats(c)
            for s in idle:
                s.close()
            wait_until(lambda c=c, base=base: _stats(c)["connected_clients"] == base["connected_clients"])
            c.close()
            seen.append((
                [int(m[k]) - int(base[k]) for m in (mid, after, killed)
                 for k in ("connected_clients", "total_connections_received")],
                sorted((e["cmd"], e["flags"], e["qbuf"], e["db"]) for e in entries),
            ))
    assert seen[0] == seen[1]
    assert seen[0][0] == [3, 0, 4, 1, 3, 1]
    assert seen[0][1] == [("NULL", "N", "0", "0")] * 3


def test_maxclients_over_tls_drops_without_a_reply_side_by_side(certs):
    """At maxclients a TLS connection is dropped before its handshake: no error reply
    can be written (Redis's acceptCommonHandler), and it counts as rejected."""
    from tests.support import RawClient

    seen = []
    for srv in both(certs, "--maxclients", "2"):
        with srv:
            c, other = RawClient(srv.port), RawClient(srv.port)
            assert c.call("PING") == other.call("PING") == b"+PONG\r\n"  # both admitted first
            with pytest.raises((ssl.SSLError, OSError)):
                with tls_connect(srv.tls_port, srv.ctx, timeout=5) as s:
                    s.sendall(b"PING\r\n")
                    if not s.recv(100):
                        raise ConnectionResetError
            wait_until(lambda c=c: "rejected_connections:1" in c.call("INFO", "stats").decode())
            seen.append(_stats(c)["connected_clients"])
            c.close()
            other.close()
    assert seen == ["2", "2"]


# -- replication -------------------------------------------------------------------------------


def _replicate(certs: Path, master_kind: str, replica_kind: str, *replica_args: str) -> None:
    # No diskless delay on the master: the full sync starts at once, not 5 s later.
    with start_tls(master_kind, certs, "--tls-replication", "yes", "--repl-diskless-sync-delay", "0") as master, \
            start_tls(replica_kind, certs, "--tls-replication", "yes", *replica_args) as replica:
        m, r = _py(master, certs), _py(replica, certs)
        m.set("before", "1")
        m.xadd("s", {"f": "v"}, id="1-1")
        assert r.execute_command("REPLICAOF", "127.0.0.1", master.tls_port) in (b"OK", "OK")
        wait_until(lambda: r.info("replication").get("master_link_status") == "up", timeout=30)
        m.set("after", "2")
        m.xadd("s", {"f": "w"}, id="2-1")
        wait_until(lambda: r.get("after") == b"2", timeout=15)
        assert r.get("before") == b"1" and r.xlen("s") == 2
        # The master lists the replica at the port it announced: its TLS port.
        slave0 = m.info("replication")["slave0"]
        assert slave0["port"] == replica.tls_port and slave0["state"] == "online"
        m.close()
        r.close()


@pytest.mark.parametrize("master, replica", [("rill", "rill"), ("redis", "rill"), ("rill", "redis")])
def test_replication_over_tls(certs, master, replica):
    _replicate(certs, master, replica)


def test_replica_presents_the_client_certificate(certs):
    """tls-client-cert-file/-key-file: what an outgoing link presents (the master checks it)."""
    _replicate(certs, "redis", "rill", "--tls-client-cert-file", str(certs / "client.crt"),
               "--tls-client-key-file", str(certs / "client.key"))


def test_replica_refuses_a_master_outside_its_ca(certs):
    with start_tls("rill", certs, "--tls-replication", "yes") as replica, \
            start_tls("redis", certs, "--tls-cert-file", str(certs / "stranger.crt"),
                      "--tls-key-file", str(certs / "stranger.key"), "--tls-auth-clients", "no",
                      ctx=client_context(certs, None, ca="otherca")) as master:
        r = _py(replica, certs)
        r.execute_command("REPLICAOF", "127.0.0.1", master.tls_port)
        # Refused within the 2 s a fixed sleep used to wait, as soon as it is.
        wait_until(lambda: "certificate verify failed" in replica.log()
                   or "CERTIFICATE_VERIFY_FAILED" in replica.log(), timeout=2.0)
        assert r.info("replication")["master_link_status"] == "down"
        r.close()


def test_auth_over_tls_side_by_side(certs):
    """requirepass and AUTH answer over TLS as over plain TCP; a client that ends its
    session with close_notify leaves nothing odd in the log."""
    replies = []
    for srv in both(certs, "--requirepass", "pw", plain=False):
        with srv, TLSClient(srv.tls_port, srv.ctx) as c:
            replies.append([c.call("GET", "k"), c.call("AUTH", "nope"), c.call("AUTH", "pw"),
                            c.call("SET", "k", "v"), c.call("GET", "k")])
            s = tls_connect(srv.tls_port, srv.ctx)
            s.sendall(b"PING\r\n")
            s.recv(100)
            s.unwrap().close()  # close_notify, then the TCP close
            assert c.call("PING") == b"+PONG\r\n"
            if srv.argv[0] == sys.executable:
                assert "eof_received" not in srv.log() and "Traceback" not in srv.log()
    assert replies[0] == replies[1]
    assert replies[0][0].startswith(b"-NOAUTH")


def test_tls_clients_get_busy_and_kill_the_script_side_by_side(certs):
    """While a script runs past busy-reply-threshold, a TLS client is answered as a plain
    one: BUSY for a write, and SCRIPT KILL ends the script (the runner, also over TLS,
    gets the kill error); the stream stays intact for both afterwards."""
    from tests.support import encode_command

    replies = []
    for srv in both(certs, "--busy-reply-threshold", "100", plain=False):
        with srv, TLSClient(srv.tls_port, srv.ctx) as runner, TLSClient(srv.tls_port, srv.ctx) as other:
            assert other.call("PING") == b"+PONG\r\n"
            runner.raw.sock.sendall(encode_command(["EVAL", "local i = 0 while true do i = i + 1 end", "0"]))
            # PONG until the script passes the threshold (a loaded machine may take a while)
            wait_until(lambda other=other: other.call("PING") != b"+PONG\r\n")
            seen = [other.call("SET", "k", "v"), other.call("PING"), other.call("SCRIPT", "KILL"),
                    runner.raw.read_reply(), runner.call("PING"), other.call("GET", "k")]
            replies.append(seen)
    assert replies[0] == replies[1]
    assert replies[0][0] == replies[0][1] == (b"-BUSY Redis is busy running a script. You can only call "
                                              b"SCRIPT KILL or SHUTDOWN NOSAVE.\r\n")
    assert replies[0][2:] == [b"+OK\r\n", replies[0][3], b"+PONG\r\n", b"$-1\r\n"]
    assert replies[0][3].startswith(b"-ERR Script killed by user with SCRIPT KILL")


def test_readme_tls_example_runs(certs):
    """The README's TLS example, its two lines as written: rill-server with only a TLS
    port, and redis-cli over mutual TLS answering PONG (certificates by the names it uses)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("### TLS", 1)[1].split("```console\n", 1)[1].split("```", 1)[0]
    server_line, cli_line = [line.split() for line in block.strip().splitlines()]
    assert server_line[0] == "rill-server" and cli_line[0] == "redis-cli"
    port = free_port()
    argv = [sys.executable, "-m", "rill.server.main",
            *[str(port) if a == "6380" else a for a in server_line[1:]],
            "--save", ""]
    with TLSServer(argv, 0, port, str(certs), client_context(certs)).start():
        cli = require_tool("redis-cli")
        out = subprocess.run([cli, *[str(port) if a == "6380" else a for a in cli_line[1:]]],
                             cwd=certs, capture_output=True, text=True, timeout=30)
        assert (out.returncode, out.stdout) == (0, "PONG\n"), out.stderr


def test_commands_read_with_the_peer_close_still_run_side_by_side(certs):
    """Commands that arrive with the client's close_notify run before the client goes,
    as in redis-server: rill runs a TLS read's commands with the loop iteration's reply
    batch, and passes the end of data on after them."""
    from tests.support import encode_command

    seen = []
    for srv in both(certs, plain=False):
        with srv, TLSClient(srv.tls_port, srv.ctx) as check:
            for i in range(20):
                s = tls_connect(srv.tls_port, srv.ctx)
                s.sendall(b"".join(encode_command(["RPUSH", "l", str(i)]) for _ in range(3)))
                try:
                    s.unwrap()  # our close_notify goes out; the replies then make unwrap fail
                except (ssl.SSLError, OSError):
                    pass
                s.close()
            wait_until(lambda check=check: check.call("LLEN", "l") == b":60\r\n")
            seen.append(check.call("LRANGE", "l", "0", "5"))
    assert seen[0] == seen[1] == b"*6\r\n$1\r\n0\r\n$1\r\n0\r\n$1\r\n0\r\n$1\r\n1\r\n$1\r\n1\r\n$1\r\n1\r\n"


def test_busy_answers_tls_input_decrypted_before_the_script(certs):
    """A TLS client whose command was read in the same loop iteration as the script's,
    after it, gets BUSY once the script is past the threshold (as from redis-server):
    rill had decrypted that command already, waiting for the reply batch, and the busy
    loop answers it rather than leaving it (and the SCRIPT KILL behind it) until the
    script ends. DEBUG SLEEP holds the loop so both reads land in one iteration; the
    event loop may hand over the two reads in either order, so this repeats until the
    script's came first (the SET then runs before the script, which is consistent too)."""
    from tests.support import encode_command

    busy = b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    outcomes = []
    with start_tls("rill", certs, "--busy-reply-threshold", "100", plain=False) as srv:
        for _ in range(12):
            with TLSClient(srv.tls_port, srv.ctx) as sleeper, TLSClient(srv.tls_port, srv.ctx) as runner, \
                    TLSClient(srv.tls_port, srv.ctx) as other:
                assert other.call("DEL", "k") in (b":0\r\n", b":1\r\n")
                sleeper.raw.sock.sendall(encode_command(["DEBUG", "SLEEP", "0.3"]))
                time.sleep(0.1)
                runner.raw.sock.sendall(encode_command(["EVAL", "local i = 0 while true do i = i + 1 end", "0"]))
                time.sleep(0.05)
                other.raw.sock.sendall(encode_command(["SET", "k", "v"]) + encode_command(["PING"]))
                first = [other.raw.read_reply(), other.raw.read_reply()]
                assert other.call("SCRIPT", "KILL") == b"+OK\r\n"
                assert runner.raw.read_reply().startswith(b"-ERR Script killed by user with SCRIPT KILL")
                assert sleeper.raw.read_reply() == b"+OK\r\n"
                after = other.call("GET", "k")
                assert (first, after) in (([busy, busy], b"$-1\r\n"), ([b"+OK\r\n", b"+PONG\r\n"], b"$1\r\nv\r\n"))
                outcomes.append(first[0] == busy)
                if outcomes[-1]:
                    break
    assert outcomes[-1], "the script's read never came first"
