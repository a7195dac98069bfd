"""Issue 25 workloads: GET and XADD over TLS, unpipelined and with -P 16.

Each server turns TLS on where it stands, through CONFIG SET (certificate, key, CA,
``tls-auth-clients no``, then ``tls-port``: both redis-server and rill configure TLS on
that last one), and redis-benchmark connects with ``--tls``. The certificates are made
once per run with the ``openssl`` command (EC P-256, as a modern deployment would).
Target: at least 0.7x redis-server unpipelined.

Registered at import time; bench/workloads.py imports this module.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from .harness import AT_LEAST, BenchError, Ctx, Row, Server, Workload, free_port, redis_benchmark
from .workloads import N_PIPELINED, N_UNPIPELINED, PIPELINE, register

_CERTS: Path | None = None


def _openssl(*args: str, cwd: Path) -> None:
    if shutil.which("openssl") is None:
        raise BenchError("openssl not found (apt-get install openssl)")
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=120)


def certificates() -> Path:
    """A CA and a server certificate it signed, made on first use."""
    global _CERTS
    if _CERTS is None:
        d = Path(tempfile.mkdtemp(prefix="rill-bench-tls-"))
        ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
        _openssl("req", "-x509", "-new", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "30",
                 "-subj", "/CN=rill bench CA", cwd=d)
        _openssl("req", "-new", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=server", cwd=d)
        _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "30", "-out", "server.crt", cwd=d)
        _CERTS = d
    return _CERTS


def tls_port(server: Server) -> int:
    """Turn TLS on in ``server`` (once per process) and return its TLS port."""
    port = getattr(server, "bench_tls_port", 0)
    if port and getattr(server, "bench_tls_pid", None) == server.pid:
        return port
    d = certificates()
    port = free_port()
    with server.client() as c:
        for name, value in (("tls-cert-file", d / "server.crt"), ("tls-key-file", d / "server.key"),
                            ("tls-ca-cert-file", d / "ca.crt"), ("tls-auth-clients", "no"),
                            ("tls-port", port)):
            reply = c.call("CONFIG", "SET", name, str(value))
            if reply != b"OK":
                raise BenchError(f"CONFIG SET {name}: {reply!r}")
    server.bench_tls_port, server.bench_tls_pid = port, server.pid  # type: ignore[attr-defined]
    return port


def _tls_rb(name: str, pipeline: int, *, test: str | None = None, command: list[str] | None = None,
            target=None) -> None:
    n = N_PIPELINED if pipeline > 1 else N_UNPIPELINED

    def measure(ctx: Ctx, server: Server) -> dict[str, float]:
        port = tls_port(server)
        extra = ["--tls", "--cacert", str(certificates() / "ca.crt")]
        rps = redis_benchmark(port, requests=ctx.n(n), clients=ctx.clients, pipeline=pipeline,
                              test=test, command=command, extra=extra)
        return {name: rps}

    register(Workload(name, "tls", 25, [Row(name, "rps", target)], measure,
                      probe=[["CONFIG", "GET", "tls-port"]]))


_XADD = ["XADD", "bench:tls", "*", "field", "value"]
_tls_rb("GET over TLS", 1, test="get", target=AT_LEAST(0.7))
_tls_rb(f"GET over TLS -P {PIPELINE}", PIPELINE, test="get")
_tls_rb("XADD over TLS", 1, command=_XADD, target=AT_LEAST(0.7))
_tls_rb(f"XADD over TLS -P {PIPELINE}", PIPELINE, command=_XADD)
