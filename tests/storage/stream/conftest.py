"""The real redis-server the side-by-side stream tests compare against."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest


@pytest.fixture(scope="module")
def real_redis():
    import redis

    from tests.support import require_tool

    binary = require_tool("redis-server")
    tmp = tempfile.mkdtemp(prefix="rill-oracle-")
    sock = os.path.join(tmp, "redis.sock")
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            "0",
            "--unixsocket",
            sock,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            tmp,
            "--rdbcompression",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.socket(socket.AF_UNIX) as probe:
                    probe.connect(sock)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    # Installed but not serving: a broken oracle fails, locally too.
                    pytest.fail("redis-server did not start")
                time.sleep(0.02)
        client = redis.Redis(unix_socket_path=sock, protocol=2)
        client.response_callbacks.clear()
        yield client
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
