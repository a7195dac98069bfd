"""tools/redis_suite.py: the checked fetch of Redis's release tree, and make tcl's copies."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from tests.tools.test_tcl_suite import suite


def _tarball(tmp_path: Path) -> tuple[str, str]:
    """A stand-in release tarball (file:// URL, SHA-256) shaped like Redis's."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (("runtest", b"#!/bin/sh\n"), ("tests/unit/x.tcl", b"# unit\n"),
                           ("utils/gen-test-certs.sh", b""), ("src/server.c", b"")):
            info = tarfile.TarInfo(f"redis-{suite.VERSION}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path = tmp_path / "release.tar.gz"
    path.write_bytes(buf.getvalue())
    return path.as_uri(), hashlib.sha256(buf.getvalue()).hexdigest()


def test_ensure_fetches_once_and_checks_the_digest(tmp_path, monkeypatch):
    url, digest = _tarball(tmp_path)
    dest = tmp_path / "cache" / "redis"
    with pytest.raises(RuntimeError, match="SHA-256"):
        suite.ensure(dest, url)
    assert not (tmp_path / "cache").exists()  # nothing unpacked from a tarball that failed its check
    monkeypatch.setattr(suite, "SHA256", digest)
    assert suite.ensure(dest, url) == dest
    assert (dest / "tests" / "unit" / "x.tcl").read_bytes() == b"# unit\n"
    assert [p.name for p in dest.parent.iterdir()] == ["redis"]  # no staging left behind
    (tmp_path / "release.tar.gz").unlink()
    assert suite.ensure(dest, url) == dest  # cached: no fetch


def test_copy_is_fresh_and_keeps_the_tls_certificates(tmp_path, monkeypatch, capsys):
    url, digest = _tarball(tmp_path)
    monkeypatch.setattr(suite, "SHA256", digest)
    cached = suite.ensure(tmp_path / "cache", url)
    monkeypatch.setattr(suite, "ensure", lambda: cached)
    dest = tmp_path / "tcl-tree"
    assert suite.main(["--copy", str(dest)]) == 0
    assert capsys.readouterr().out.strip() == str(dest)
    (dest / "tests" / "tmp").mkdir()
    (dest / "tests" / "tls").mkdir()
    (dest / "tests" / "tls" / "ca.crt").write_text("cert")
    assert suite.main(["--copy", str(dest)]) == 0
    assert not (dest / "tests" / "tmp").exists()  # what a run wrote is gone
    assert (dest / "tests" / "tls" / "ca.crt").read_text() == "cert"
    assert (dest / "runtest").is_file() and (dest / "src" / "server.c").is_file()
    assert suite.main(["--bogus"]) == 2
