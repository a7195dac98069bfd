"""TLS as Redis 6/7 serve it: the tls-* parameters, the ecosystem's clients, bad peers,
certificate reloads and replication over TLS, side by side with redis-server.

Certificates come from the ``openssl`` command (.ci/run installs it), made once per
session: a CA, a server certificate, a client certificate, one signed by another CA
(untrusted), an encrypted key, and DH parameters.
"""

from __future__ import annotations

import asyncio
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


def start_tls(kind: str, certs: Path, *args: str, plain: bool = True, workdir: str | None = None) -> TLSServer:
    """rill or redis-server with TLS on a free port, mutual TLS by default (as Redis)."""
    port, tls_port = free_port(), free_port()
    workdir = workdir or scratch_dir(f"{kind}-tls-")
    if kind == "rill":
        argv = [sys.executable, "-m", "rill.server.main"]
    else:
        argv = [require_tool("redis-server"), "--appendonly", "no"]
    argv += ["--port", str(port if plain else 0), "--tls-port", str(tls_port), *tls_args(certs),
             "--save", "", "--dir", workdir, "--enable-debug-command", "yes", *args]
    return TLSServer(argv, port, tls_port, workdir, client_context(certs)).start()


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
