"""A foreground RDB save shared with a forked helper process.

SAVE, SHUTDOWN and DEBUG RELOAD block the server until the file is written, and
in Python the encoding, not the disk, is what takes that time. With a second
core it halves: a forked child encodes the second half of every database into a
scratch file while this process encodes the first halves into the real one,
then appends the child's sections in place. Keys come out in the order a single
pass writes them, so the file (and its checksum) is the same either way.

Nothing is lost if the helper cannot help: a failed fork, a child that dies or a
short scratch file only mean this process encodes those halves itself.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import signal
import struct
from collections.abc import Iterable
from itertools import islice
from typing import Any, BinaryIO

from .rdb import RdbWriter, SaveOptions, save_file

# Below this many keys a fork (page tables, copy-on-write faults) is not worth it.
MIN_KEYS = 200_000
_CHUNK = 1 << 20
_OFFSET = struct.Struct("<Q")

Databases = Iterable[tuple[int, dict[bytes, Any], dict[bytes, int]]]


def save_file_split(
    sink: BinaryIO,
    databases: Databases,
    options: SaveOptions,
    scratch_path: str,
    min_keys: int = MIN_KEYS,
) -> RdbWriter:
    """``rdb.save_file`` with the second half of each database encoded by a child."""
    dbs = [(db_id, data, expires) for db_id, data, expires in databases if data]
    if sum(len(d) for _, d, _ in dbs) < min_keys or (os.cpu_count() or 1) < 2 or not hasattr(os, "fork"):
        return save_file(sink, dbs, options)
    halves = [len(data) // 2 for _, data, _ in dbs]
    rfd, wfd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(rfd)
        os.close(wfd)
        return save_file(sink, dbs, options)
    if pid == 0:  # pragma: no cover - runs in the child, which leaves through os._exit
        os.close(rfd)
        _child(dbs, halves, options, scratch_path, wfd)
    os.close(wfd)
    try:
        return _parent(sink, dbs, halves, options, scratch_path, pid, rfd)
    finally:
        os.close(rfd)
        try:
            os.unlink(scratch_path)
        except OSError:
            pass


def _child(dbs: list, halves: list[int], options: SaveOptions, scratch_path: str, wfd: int) -> None:
    """Encode every second half into the scratch file; report where each one ends."""
    code = 1
    try:
        gc.disable()  # the collector would touch (and copy) every page of the dataset
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            signal.signal(sig, signal.SIG_DFL)
        ends = []
        with open(scratch_path, "wb") as f:
            w = RdbWriter(f, dataclasses.replace(options, checksum=False))
            for (_, data, expires), half in zip(dbs, halves, strict=True):
                w.write_keys(islice(data.items(), half, None), expires)
                w.spill()
                ends.append(w.written)
        os.write(wfd, b"".join(_OFFSET.pack(e) for e in ends))
        code = 0
    except BaseException:  # noqa: BLE001 - the parent encodes these halves itself
        pass
    finally:
        os._exit(code)


def _parent(sink: BinaryIO, dbs: list, halves: list[int], options: SaveOptions, scratch_path: str,
            pid: int, rfd: int) -> RdbWriter:
    w = RdbWriter(sink, options)
    w.header()
    sections: list[tuple[int, int]] | None = None
    scratch = None
    try:
        for i, ((db_id, data, expires), half) in enumerate(zip(dbs, halves, strict=True)):
            w.db_header(db_id, len(data), len(expires))
            w.write_keys(islice(data.items(), half), expires)
            if sections is None:
                sections = _wait_for_child(pid, rfd, len(dbs), scratch_path)
                if sections:
                    scratch = open(scratch_path, "rb")  # noqa: SIM115 - closed below
            if sections:
                start, end = sections[i]
                scratch.seek(start)
                while start < end:
                    chunk = scratch.read(min(_CHUNK, end - start))
                    if not chunk:
                        raise OSError("the RDB helper's scratch file is shorter than it reported")
                    w.raw(chunk)
                    start += len(chunk)
            else:
                w.write_keys(islice(data.items(), half, None), expires)
    finally:
        if scratch is not None:
            scratch.close()
        if sections is None:
            _wait_for_child(pid, rfd, len(dbs), scratch_path)  # never leave a zombie behind
    w.finish()
    return w


def _wait_for_child(pid: int, rfd: int, count: int, scratch_path: str) -> list[tuple[int, int]]:
    """The child's ``(start, end)`` scratch offsets per database, or [] if it failed."""
    report = bytearray()
    while True:
        chunk = os.read(rfd, 4096)
        if not chunk:
            break
        report += chunk
    _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0 or len(report) != count * _OFFSET.size:
        return []
    ends = [_OFFSET.unpack_from(report, i * _OFFSET.size)[0] for i in range(count)]
    try:
        if os.path.getsize(scratch_path) < ends[-1]:
            return []
    except OSError:
        return []
    starts = [0, *ends[:-1]]
    return list(zip(starts, ends, strict=True))
