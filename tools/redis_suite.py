"""Redis 7.0.15's source tree, for its own Tcl suite: fetched once, checked, cached.

Debian's archive carries the upstream release tarball unchanged (``redis_7.0.15.orig.tar.gz``,
the source of the redis-server package the tests compare against; its ``tests/`` is the
tag's). It is fetched from Debian's pool, so it comes from the same registry as the
packages ``.ci/run`` installs, and its SHA-256 is the one Debian's ``.dsc`` signs.
Nothing of it is committed: the tree lives under ``.cache/`` (git-ignored).

    python tools/redis_suite.py               # fetch if missing; print .cache/redis-7.0.15
    python tools/redis_suite.py --copy DEST   # a fresh writable copy at DEST (make tcl's)
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

VERSION = "7.0.15"
URL = f"http://deb.debian.org/debian/pool/main/r/redis/redis_{VERSION}.orig.tar.gz"
SHA256 = "4b1dc4ee6d622a09fff9c6777191209750fb5e5a725ef78ea012d6eef4c22982"
DEFAULT = Path(__file__).resolve().parents[1] / ".cache" / f"redis-{VERSION}"


def ensure(dest: Path = DEFAULT, url: str = URL, timeout: float = 120.0) -> Path:
    """Return ``dest`` holding the tree, fetching and unpacking it first if it is missing.

    The tree appears all at once (unpacked beside ``dest``, then renamed), so an interrupted
    fetch never leaves half a tree that a later call would take for a whole one."""
    if (dest / "runtest").is_file():
        return dest
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        data = resp.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        raise RuntimeError(f"{url}: SHA-256 {digest}, expected {SHA256}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".redis-suite-", dir=dest.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            # the filter refuses paths outside ``staging``; Pythons before 3.11.4 lack it,
            # and there the pinned checksum is the guard
            extra = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
            tar.extractall(staging, **extra)
        os.replace(staging / f"redis-{VERSION}", dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def writable_copy(tree: Path, dest: Path) -> Path:
    """A private copy of what ``runtest`` reads and writes (it writes into ``tests/tmp``), so
    every run starts from the pristine tree and runs never share one."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(tree / "runtest", dest / "runtest")
    for sub in ("tests", "utils", "src"):
        shutil.copytree(tree / sub, dest / sub, symlinks=True)
    return dest


def main(argv: list[str]) -> int:
    """``redis_suite.py`` prints the cached tree's path; ``--copy DEST`` (what ``make tcl``
    uses) replaces DEST with a fresh writable copy of it and prints DEST's path."""
    if argv[:1] == ["--copy"] and len(argv) == 2:
        dest = Path(argv[1]).resolve()
        tree = ensure()
        # the TLS mode's certificates (tests/tls) cost minutes to make: they outlive the copy
        certs = dest / "tests" / "tls"
        kept = dest.with_name(dest.name + ".tls")
        if certs.is_dir():
            shutil.rmtree(kept, ignore_errors=True)
            certs.rename(kept)
        shutil.rmtree(dest, ignore_errors=True)
        writable_copy(tree, dest)
        if kept.is_dir():
            kept.rename(certs)
        print(dest)
    elif not argv:
        print(ensure())
    else:
        print("usage: redis_suite.py [--copy DEST]", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
