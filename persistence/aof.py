"""Redis 7's multi-part append-only file: manifest, command stream, writer, rewrite.

Facts: shared/reference/redis-formats.md section 4 (restated from aof.c).

Layout, inside ``<dir>/<appenddirname>``::

    <appendfilename>.manifest            which files make up the dataset, in order
    <appendfilename>.<seq>.base.rdb      the snapshot (an RDB with aof-base=1) ...
    <appendfilename>.<seq>.base.aof      ... or commands, with aof-use-rdb-preamble no
    <appendfilename>.<seq>.incr.aof      commands appended since that base

This module knows the formats and the file mechanics, nothing about the server:

* ``Manifest``: parse / format / the naming and history rules of a rewrite;
* ``encode_command`` and ``CommandParser``: the RESP command stream, with the
  offsets a loader needs to repair a torn tail (``AofTruncated``) or to refuse a
  corrupt middle (``AofFormatError``);
* ``AofWriter``: the open incr file, its buffer, SELECT tracking and the three
  fsync policies (everysec fsyncs from a background thread, as Redis's bio does);
* ``rewrite_commands``: the RESP base (one generator per value type in
  ``REWRITERS``, extended like the RDB codec).
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from rill.protocol.parser import repr_body
from rill.storage.stream import Stream, format_sid

__all__ = [
    "ManifestError",
    "AofFormatError",
    "AofTruncated",
    "AofFile",
    "Manifest",
    "encode_command",
    "CommandParser",
    "AofWriter",
    "rewrite_commands",
    "REWRITERS",
    "write_manifest",
    "fsync_dir",
]

BASE = "b"
HISTORY = "h"
INCR = "i"

ITEMS_PER_CMD = 64  # AOF_REWRITE_ITEMS_PER_CMD


class ManifestError(Exception):
    """The manifest cannot be parsed or breaks one of its rules. ``lineno`` and ``line``
    (trimmed) say where, when the error is about one line's content (Redis logs them)."""

    def __init__(self, message: str, lineno: int = 0, line: str | None = None) -> None:
        super().__init__(message)
        self.lineno = lineno
        self.line = line


# aofLoadManifestFromFile reads lines with fgets into a buffer this long (plus the NUL):
# a line that does not end within it is refused.
MANIFEST_MAX_LINE = 1024


class AofFormatError(Exception):
    """Bytes that are not a RESP command where one must start (fatal: a corrupt middle)."""

    def __init__(self, message: str, offset: int) -> None:
        self.offset = offset
        super().__init__(f"{message} (at offset {offset})")


class AofTruncated(Exception):
    """The data ends inside a command; ``valid_up_to`` is where the last whole one ended."""

    def __init__(self, valid_up_to: int) -> None:
        self.valid_up_to = valid_up_to
        super().__init__(f"unexpected end of file after offset {valid_up_to}")


# --------------------------------------------------------------------------------------------
# Manifest
# --------------------------------------------------------------------------------------------


@dataclass
class AofFile:
    name: str
    seq: int
    kind: str  # BASE, HISTORY or INCR


def _needs_quoting(name: str) -> bool:
    return any(c in name for c in " \t\r\n\"'\\") or not name.isprintable() or name == ""


def _repr_name(name: str) -> str:
    """sdscatrepr: double-quoted with C escapes."""
    return '"' + repr_body(name.encode("utf-8", "surrogateescape")).decode("ascii") + '"'


def _atoll(s: str) -> int:
    """C's atoll: optional white space and sign, then the leading digits (0 if none);
    past the int64 range it saturates, as strtoll does."""
    t = s.lstrip(" \t\n\v\f\r")
    sign = -1 if t[:1] == "-" else 1
    if t[:1] in ("+", "-"):
        t = t[1:]
    digits = len(t) - len(t.lstrip("0123456789"))
    if not digits:
        return 0
    v = sign * int(t[:digits])
    return max(-(1 << 63), min(v, (1 << 63) - 1))


def split_args(line: str) -> list[str] | None:
    """sdssplitargs: whitespace-separated words, "double" (C escapes) or 'single' quoted."""
    out: list[str] = []
    i = 0
    n = len(line)
    while True:
        while i < n and line[i] in " \t\r\n\v\f":
            i += 1
        if i >= n:
            return out
        word: list[str] = []
        if line[i] == '"':
            i += 1
            while True:
                if i >= n:
                    return None  # unterminated quotes
                c = line[i]
                if c == "\\" and i + 1 < n:
                    nxt = line[i + 1]
                    if nxt == "x" and i + 3 < n and all(h in "0123456789abcdefABCDEF" for h in line[i + 2 : i + 4]):
                        word.append(chr(int(line[i + 2 : i + 4], 16)))
                        i += 4
                        continue
                    word.append({"n": "\n", "r": "\r", "t": "\t", "b": "\b", "a": "\a"}.get(nxt, nxt))
                    i += 2
                    continue
                if c == '"':
                    i += 1
                    if i < n and line[i] not in " \t\r\n\v\f":
                        return None  # closing quote must be followed by a space
                    break
                word.append(c)
                i += 1
        elif line[i] == "'":
            i += 1
            while True:
                if i >= n:
                    return None
                c = line[i]
                if c == "\\" and i + 1 < n and line[i + 1] == "'":
                    word.append("'")
                    i += 2
                    continue
                if c == "'":
                    i += 1
                    if i < n and line[i] not in " \t\r\n\v\f":
                        return None
                    break
                word.append(c)
                i += 1
        else:
            while i < n and line[i] not in " \t\r\n\v\f":
                word.append(line[i])
                i += 1
        out.append("".join(word))


@dataclass
class Manifest:
    """The files of one AOF, plus the sequence counters new names are drawn from."""

    base: AofFile | None = None
    incrs: list[AofFile] = field(default_factory=list)
    history: list[AofFile] = field(default_factory=list)
    base_seq: int = 0
    incr_seq: int = 0

    @classmethod
    def parse(cls, text: str) -> Manifest:
        """aofLoadManifestFromFile's rules; ManifestError on any violation.

        As there: the file is read in lines of at most MANIFEST_MAX_LINE bytes; a line
        starting with '#' is skipped (even an overlong one, whose rest is then read as
        the next line); any other line must end with a newline within that length and
        must not be blank; keys are matched case-insensitively, a repeated key's last
        value counts, ``seq`` is read as atoll reads it and ``type`` by its first
        character; a missing or zero seq, type or file is a format error. Only a file
        with no line at all is empty (one holding only comments lists no files)."""
        m = cls()
        data = text.encode("utf-8", "surrogateescape")
        pos = 0
        lineno = 0
        while pos < len(data):
            nl = data.find(b"\n", pos, pos + MANIFEST_MAX_LINE)
            end = nl + 1 if nl >= 0 else min(pos + MANIFEST_MAX_LINE, len(data))
            chunk = data[pos:end]
            pos = end
            lineno += 1
            if chunk[:1] == b"#":
                continue
            if nl < 0:
                raise ManifestError("The AOF manifest file contains too long line")
            line = chunk.strip(b" \t\r\n").decode("utf-8", "surrogateescape")
            argv = split_args(line) if line else None
            if argv is None or len(argv) < 6 or len(argv) % 2:
                raise ManifestError("Invalid AOF manifest file format", lineno, line)
            name: str | None = None
            n = 0
            kind = ""
            for k in range(0, len(argv), 2):
                key, value = argv[k].lower(), argv[k + 1]
                if key == "file":
                    name = value
                    if "/" in name or "\\" in name:
                        raise ManifestError("File can't be a path, just a filename", lineno, line)
                elif key == "seq":
                    n = _atoll(value)
                elif key == "type":
                    kind = value[:1]
                # other keys are skipped, for forward compatibility
            if name is None or not n or not kind:
                raise ManifestError("Invalid AOF manifest file format", lineno, line)
            f = AofFile(name, n, kind)
            if kind == BASE:
                if m.base is not None:
                    raise ManifestError("Found duplicate base file information", lineno, line)
                m.base = f
                m.base_seq = n
            elif kind == HISTORY:
                m.history.append(f)
            elif kind == INCR:
                if n <= m.incr_seq:
                    raise ManifestError("Found a non-monotonic sequence number", lineno, line)
                m.incrs.append(f)
                m.incr_seq = n
            else:
                raise ManifestError("Unknown AOF file type", lineno, line)
        if not lineno:
            raise ManifestError("Found an empty AOF manifest")
        return m

    def format(self) -> str:
        """Base first, then history, then incr files (aofManifestToString)."""
        out = []
        for f in ([self.base] if self.base else []) + self.history + self.incrs:
            name = _repr_name(f.name) if _needs_quoting(f.name) else f.name
            out.append(f"file {name} seq {f.seq} type {f.kind}\n")
        return "".join(out)

    def copy(self) -> Manifest:
        return Manifest(
            AofFile(self.base.name, self.base.seq, self.base.kind) if self.base else None,
            [AofFile(f.name, f.seq, f.kind) for f in self.incrs],
            [AofFile(f.name, f.seq, f.kind) for f in self.history],
            self.base_seq,
            self.incr_seq,
        )

    def new_base(self, filename: str, rdb_preamble: bool) -> str:
        """Name the next base; the current one becomes history (first in line, as Redis
        lists it)."""
        if self.base is not None:
            self.base.kind = HISTORY
            self.history.insert(0, self.base)
        self.base_seq += 1
        ext = "rdb" if rdb_preamble else "aof"
        name = f"{filename}.{self.base_seq}.base.{ext}"
        self.base = AofFile(name, self.base_seq, BASE)
        return name

    def new_incr(self, filename: str) -> str:
        self.incr_seq += 1
        name = f"{filename}.{self.incr_seq}.incr.aof"
        self.incrs.append(AofFile(name, self.incr_seq, INCR))
        return name

    def rewritten(self, appending: bool) -> None:
        """After a rewrite the new base holds everything the incr files did, so they
        become history; only the one being appended to stays (``appending``: the AOF
        is on). With the AOF off none is kept: a leftover incr from an earlier time
        the AOF was on would otherwise be replayed on top of the new base."""
        done = self.incrs[:-1] if appending else self.incrs
        for f in done:
            f.kind = HISTORY
        self.history[:0] = done
        self.incrs = self.incrs[len(done):]

    def files(self) -> list[AofFile]:
        """The files to load, in order: base, then incrs."""
        return ([self.base] if self.base else []) + list(self.incrs)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_manifest(dirpath: str, filename: str, manifest: Manifest) -> None:
    """writeAofManifestFile: temp file, fsync, rename over the manifest, fsync the dir."""
    final = os.path.join(dirpath, f"{filename}.manifest")
    temp = os.path.join(dirpath, f"temp-{filename}.manifest")
    data = manifest.format().encode("utf-8", "surrogateescape")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temp, final)
    fsync_dir(dirpath)


# --------------------------------------------------------------------------------------------
# The command stream
# --------------------------------------------------------------------------------------------


_BULK_HEADERS = tuple(b"$%d\r\n" % n for n in range(256))
_ARRAY_HEADERS = tuple(b"*%d\r\n" % n for n in range(64))


def encode_command(argv: Iterable[bytes]) -> bytes:
    """One command as RESP multibulk (catAppendOnlyGenericCommand)."""
    args = argv if type(argv) is list else list(argv)
    n = len(args)
    parts = [_ARRAY_HEADERS[n] if n < 64 else b"*%d\r\n" % n]
    add = parts.append
    heads = _BULK_HEADERS
    for a in args:
        if type(a) is not bytes:
            a = bytes(a) if isinstance(a, (bytearray, memoryview)) else str(a).encode()
        m = len(a)
        add(heads[m] if m < 256 else b"$%d\r\n" % m)
        add(a)
        add(b"\r\n")
    return b"".join(parts)


_SELECT = [encode_command([b"SELECT", b"%d" % i]) for i in range(16)]


def select_command(db: int) -> bytes:
    return _SELECT[db] if db < 16 else encode_command([b"SELECT", b"%d" % db])


class CommandParser:
    """Walks RESP commands in an AOF image, tracking the offsets a loader needs.

    ``next()`` returns the next argv (None at a clean end), advancing ``pos``;
    ``#`` lines (annotations such as ``#TS:``) are skipped.  A command cut short by
    the end of the data raises AofTruncated with the offset where it started; a
    byte sequence that can never be a command raises AofFormatError.
    """

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data)

    def _line(self, p: int, start: int) -> tuple[bytes, int]:
        i = self.data.find(b"\r\n", p)
        if i < 0:
            raise AofTruncated(start)
        return self.data[p:i], i + 2

    def next(self) -> list[bytes] | None:
        data = self.data
        end = self.end
        while True:
            start = self.pos
            if start >= end:
                return None
            c = data[start]
            if c == 35:  # '#': an annotation line
                i = data.find(b"\n", start)
                if i < 0:
                    raise AofTruncated(start)
                self.pos = i + 1
                continue
            if c != 42:  # '*'
                raise AofFormatError("bad file format reading the append only file", start)
            head, p = self._line(start + 1, start)
            try:
                argc = int(head)
            except ValueError:
                raise AofFormatError("bad file format reading the append only file", start) from None
            if argc < 1:
                raise AofFormatError("bad file format reading the append only file", start)
            argv: list[bytes] = []
            for _ in range(argc):
                if p >= end:
                    raise AofTruncated(start)
                if data[p] != 36:  # '$'
                    raise AofFormatError("bad file format reading the append only file", p)
                head, p = self._line(p + 1, start)
                try:
                    n = int(head)
                except ValueError:
                    raise AofFormatError("bad file format reading the append only file", p) from None
                if n < 0:
                    raise AofFormatError("bad file format reading the append only file", p)
                q = p + n
                if q + 2 > end:
                    raise AofTruncated(start)
                if data[q : q + 2] != b"\r\n":
                    raise AofFormatError("bad file format reading the append only file", q)
                argv.append(data[p:q])
                p = q + 2
            self.pos = p
            return argv

    def __iter__(self) -> Iterator[list[bytes]]:
        while True:
            argv = self.next()
            if argv is None:
                return
            yield argv


# --------------------------------------------------------------------------------------------
# Writer
# --------------------------------------------------------------------------------------------


class _FsyncThread:
    """Background fsync for appendfsync everysec (Redis's bio): never blocks the loop.

    Each job reports its outcome to the writer that submitted it (``AofWriter.
    _fsync_done``, called in this thread): a failed fsync must stop writes just as a
    failed write does.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: list[tuple[int, Callable[[OSError | None], None]]] = []
        self.busy = False
        self._thread = threading.Thread(target=self._run, name="rill-aof-fsync", daemon=True)
        self._thread.start()

    def submit(self, fd: int, done: Callable[[OSError | None], None]) -> None:
        """fsync (a duplicate of) ``fd``, then ``done(error or None)``; the duplicate is
        closed afterwards."""
        dup = os.dup(fd)
        with self._cond:
            self._queue.append((dup, done))
            self.busy = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self.busy = False
                    self._cond.wait()
                fd, done = self._queue.pop(0)
            error: OSError | None = None
            try:
                os.fdatasync(fd)
            except OSError as e:
                # EBADF / EINVAL say the descriptor cannot be synced (not a regular
                # file), not that data was lost: bio ignores them too.
                if e.errno not in (errno.EBADF, errno.EINVAL):
                    error = e
            finally:
                os.close(fd)
            done(error)

    def pending(self) -> bool:
        with self._cond:
            return self.busy or bool(self._queue)


_fsync_thread: _FsyncThread | None = None


def _background_fsync(fd: int, done: Callable[[OSError | None], None]) -> _FsyncThread:
    global _fsync_thread
    if _fsync_thread is None:
        _fsync_thread = _FsyncThread()
    _fsync_thread.submit(fd, done)
    return _fsync_thread


class AofWriter:
    """The open incr file: buffered appends, SELECT tracking, the fsync policy.

    ``feed`` takes what the AOF feed of the propagation path hands it.  ``write`` moves the buffer to the kernel;
    ``sync`` makes it durable according to the policy: "always" fsyncs on the
    spot (the caller does it before replies leave), "everysec" hands an fsync to
    the background thread at most once a second, "no" leaves it to the OS.

    Failures are kept, not raised: ``write_error`` (the last write failed; the
    buffer still holds what did not reach the file) and ``fsync_error`` (the last
    fsync failed; set from the fsync thread) each last until a later write or
    fsync succeeds. The server refuses writes while either is set, as Redis's
    ``aof_last_write_status`` and ``aof_bio_fsync_status`` make it.
    """

    def __init__(self, path: str, policy: str = "everysec") -> None:
        self.path = path
        self.policy = policy
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.buf = bytearray()
        self.selected_db = -1
        # aof-timestamp-enabled: a "#TS:<unix seconds>" line goes before the first
        # command of each new second, as redis-check-aof --truncate-to-timestamp reads them.
        self.timestamps = False
        self.last_timestamp = 0
        self.last_fsync = time.monotonic()
        self.unsynced = False  # written but not yet fsynced
        self.write_error: OSError | None = None
        self.fsync_error: OSError | None = None
        # For the log: the last failed write's (bytes written, bytes wanted) if it was
        # short, and why the truncation that undoes it failed, if it did.
        self.short_write: tuple[int, int] | None = None
        self.truncate_error: OSError | None = None
        self.delayed_fsyncs = 0
        self.on_data: Callable[[], None] | None = None  # called when the buffer becomes non-empty
        # Called, in the fsync thread, when a background fsync's outcome changes
        # ``fsync_error`` (the server re-arms or clears its MISCONF check).
        self.on_fsync_status: Callable[[], None] | None = None
        # Told how long each write of the buffer ("write") and each fsync that
        # appendfsync always makes ("fsync-always") took, in ns (the latency monitor).
        self.on_latency: Callable[[str, int], None] | None = None

    # -- appending ---------------------------------------------------------
    def feed(self, ops: list[tuple[int, list[bytes]]]) -> None:
        """Append the effects of one command (already wrapped in MULTI/EXEC if several).

        The RESP is written straight into the buffer (no intermediate bytes per command).
        """
        buf = self.buf
        was_empty = not buf
        if self.timestamps:
            now = int(time.time())
            if now > self.last_timestamp:
                self.last_timestamp = now
                buf += timestamp_annotation(now)
        heads = _BULK_HEADERS
        arrays = _ARRAY_HEADERS
        for db, argv in ops:
            if db != self.selected_db:
                buf += select_command(db)
                self.selected_db = db
            n = len(argv)
            buf += arrays[n] if n < 64 else b"*%d\r\n" % n
            for a in argv:
                if type(a) is not bytes:
                    a = bytes(a) if isinstance(a, (bytearray, memoryview)) else str(a).encode()
                m = len(a)
                buf += heads[m] if m < 256 else b"$%d\r\n" % m
                buf += a
                buf += b"\r\n"
        if was_empty and buf and self.on_data is not None:
            self.on_data()

    # -- flushing ------------------------------------------------------------
    def write(self) -> bool:
        """Write the whole buffer (retrying short writes); False and keep it on error."""
        if not self.buf:
            return True
        report = self.on_latency
        if report is None:
            return self._write()
        start = time.perf_counter_ns()
        try:
            return self._write()
        finally:
            report("write", time.perf_counter_ns() - start)

    @property
    def error(self) -> OSError | None:
        """What stops writes now: the last write's error, else the last fsync's."""
        return self.write_error or self.fsync_error

    def _write(self) -> bool:
        """aofWrite plus flushAppendOnlyFile's error handling.

        A short write (some bytes landed, then the kernel refused more) is undone by
        truncating the file back to where this write began, so the file never ends
        inside a command and the whole buffer is retried later; the error is then
        ENOSPC, as Redis reports it. If the truncation fails too, the bytes that
        landed stay (a valid prefix, thanks to O_APPEND) and only the rest is kept.
        """
        buf = self.buf
        want = len(buf)
        done = 0
        error: OSError | None = None
        try:
            done = os.write(self.fd, buf)
            if done < want:
                view = memoryview(buf)
                try:
                    while done < want:
                        done += os.write(self.fd, view[done:])
                finally:
                    view.release()
        except OSError as e:
            error = e
        if error is None:
            self.size += done
            buf.clear()
            self.unsynced = True
            self.write_error = None
            return True
        self.short_write = None
        self.truncate_error = None
        if done:
            self.short_write = (done, want)
            try:
                os.ftruncate(self.fd, self.size)
            except OSError as e:
                self.truncate_error = e
                del buf[:done]
                self.size += done
                self.unsynced = True
            error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.write_error = error
        return False

    def sync_now(self) -> None:
        """fdatasync in the caller's thread (appendfsync always, file switch, shutdown);
        raises OSError (and keeps it as ``fsync_error``) if it fails."""
        if self.unsynced:
            try:
                os.fdatasync(self.fd)
            except OSError as e:
                if e.errno in (errno.EBADF, errno.EINVAL):
                    return  # not a file that can be synced: nothing was lost
                self.fsync_error = e
                raise
            self.unsynced = False
            self.fsync_error = None
            self.last_fsync = time.monotonic()

    def _fsync_done(self, error: OSError | None) -> None:
        """A background fsync ended (called in the fsync thread). A failed one leaves
        the data unsynced, so that the next second tries again instead of waiting for
        a write that the error itself forbids."""
        before = self.fsync_error
        if error is not None:
            self.unsynced = True
        self.fsync_error = error
        notify = self.on_fsync_status
        if notify is not None and (before is None) != (error is None):
            notify()

    def flush(self, force_sync: bool = False) -> bool:
        """Write, then fsync as the policy says; False if the write or a synchronous
        fsync failed (``write_error`` / ``fsync_error`` say which)."""
        ok = self.write()
        if not ok:
            return False
        policy = self.policy
        try:
            if policy == "always" and self.on_latency is not None:
                start = time.perf_counter_ns()
                self.sync_now()
                self.on_latency("fsync-always", time.perf_counter_ns() - start)
            elif force_sync or policy == "always":
                self.sync_now()
            elif policy == "everysec" and self.unsynced:
                now = time.monotonic()
                if now - self.last_fsync >= 1.0:
                    thread = _fsync_thread
                    if thread is not None and thread.pending():
                        self.delayed_fsyncs += 1  # still busy with the previous one
                        return True
                    self.unsynced = False
                    self.last_fsync = now
                    _background_fsync(self.fd, self._fsync_done)
        except OSError:
            return False
        return True

    def close(self, sync: bool = True) -> None:
        if self.fd < 0:
            return
        try:
            self.write()
            if sync:
                self.sync_now()
        finally:
            os.close(self.fd)
            self.fd = -1


# --------------------------------------------------------------------------------------------
# Rewrite (the RESP base used with aof-use-rdb-preamble no)
# --------------------------------------------------------------------------------------------

Rewriter = Callable[[bytes, Any], Iterator[list[bytes]]]


def _chunks(items: list[Any], n: int = ITEMS_PER_CMD) -> Iterator[list[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _rewrite_list(key: bytes, value: Any) -> Iterator[list[bytes]]:
    items = list(value)
    for chunk in _chunks(items):
        yield [b"RPUSH", key, *chunk]


def _rewrite_stream(key: bytes, s: Stream) -> Iterator[list[bytes]]:
    """rewriteStreamObject: entries, XSETID, groups, consumers and their pending entries."""
    if s.length:
        for sid, fields in s.iter_range():
            yield [b"XADD", key, format_sid(sid), *fields]
    else:
        yield [b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]
    yield [
        b"XSETID", key, format_sid(s.last_id),
        b"ENTRIESADDED", b"%d" % s.entries_added,
        b"MAXDELETEDID", format_sid(s.max_deleted_entry_id),
    ]
    st = s.idmp
    if st is not None:
        # Redis 8.6 IDMP state: settings, then every tracked iid (XIDMPRECORD, which the
        # AOF loader accepts for entries deleted since). Insertion times restart at load.
        if st.configured:
            yield [
                b"XCFGSET", key, b"IDMP-DURATION", b"%d" % st.duration,
                b"IDMP-MAXSIZE", b"%d" % st.maxsize,
            ]
        for pid, iids in st.producers.items():
            for iid, (sid, _at) in iids.items():
                yield [b"XIDMPRECORD", key, pid, iid, format_sid(sid)]
    for g in s.groups():
        yield [
            b"XGROUP", b"CREATE", key, g.name, format_sid(g.last_id),
            b"ENTRIESREAD", b"%d" % g.entries_read,
        ]
        for c in g.consumers_sorted():
            if not len(c.pel):
                yield [b"XGROUP", b"CREATECONSUMER", key, g.name, c.name]
                continue
            for sid, nack in c.pel.items():
                yield [
                    b"XCLAIM", key, g.name, c.name, b"0", format_sid(sid),
                    b"TIME", b"%d" % nack.delivery_time,
                    b"RETRYCOUNT", b"%d" % nack.delivery_count,
                    b"JUSTID", b"FORCE",
                ]
        if g.nacked:
            # XNACKed entries (Redis 8.8), in release order.
            for sid in g.nacked:
                nack = g.pel.get(sid)
                if nack is not None:
                    yield [
                        b"XNACK", key, g.name, b"FAIL", b"IDS", b"1", format_sid(sid),
                        b"RETRYCOUNT", b"%d" % nack.delivery_count, b"FORCE",
                    ]


def _rewrite_hash(key: bytes, value: Any) -> Iterator[list[bytes]]:
    pairs = list(value.rdb_items())
    for chunk in _chunks(pairs):
        yield [b"HMSET", key, *(x for pair in chunk for x in pair)]


def _rewrite_set(key: bytes, value: Any) -> Iterator[list[bytes]]:
    for chunk in _chunks(list(value.rdb_items())):
        yield [b"SADD", key, *chunk]


def _format_score(score: float) -> bytes:
    """%.17g as Redis's rioWriteBulkDouble prints scores (inf as "inf")."""
    if score == float("inf"):
        return b"inf"
    if score == float("-inf"):
        return b"-inf"
    return b"%.17g" % score


def _rewrite_zset(key: bytes, value: Any) -> Iterator[list[bytes]]:
    for chunk in _chunks(list(value.rdb_items())):
        yield [b"ZADD", key, *(x for m, s in chunk for x in (_format_score(s), m))]


REWRITERS: dict[bytes, Rewriter] = {
    b"list": _rewrite_list,
    b"stream": _rewrite_stream,
    b"hash": _rewrite_hash,
    b"set": _rewrite_set,
    b"zset": _rewrite_zset,
}


def rewrite_commands(
    databases: Iterable[tuple[int, dict[bytes, Any], dict[bytes, int]]],
) -> Iterator[list[bytes]]:
    """The commands that rebuild the dataset: SELECT per non-empty db, each key, its PEXPIREAT."""
    for db_id, data, expires in databases:
        if not data:
            continue
        yield [b"SELECT", b"%d" % db_id]
        for key, value in data.items():
            t = type(value)
            if t is bytes or t is bytearray:
                yield [b"SET", key, bytes(value)]
            else:
                rewriter = REWRITERS.get(value.type_name)
                if rewriter is None:
                    raise ValueError(f"no AOF rewrite for type {value.type_name.decode()}")
                yield from rewriter(key, value)
            when = expires.get(key) if expires else None
            if when is not None:
                yield [b"PEXPIREAT", key, b"%d" % when]


def timestamp_annotation(unix_seconds: int) -> bytes:
    """The AOF annotation line that dates what follows it; loaders skip ``#`` lines."""
    return b"#TS:%d\r\n" % unix_seconds


def write_resp_base(
    sink: Any, databases: Iterable[tuple[int, dict[bytes, Any], dict[bytes, int]]],
    functions: Iterable[bytes] = (), timestamp: int | None = None,
) -> int:
    """Write the RESP form of the dataset to a binary file; bytes written.

    Function libraries come first, as FUNCTION LOAD of each library's code
    (Redis's rewriteFunctions), so the keys' commands find them loaded. With
    ``timestamp`` (aof-timestamp-enabled) the file opens with its annotation.
    """
    buf = bytearray() if timestamp is None else bytearray(timestamp_annotation(timestamp))
    for code in functions:
        buf += encode_command([b"FUNCTION", b"LOAD", code])
    total = 0
    for argv in rewrite_commands(databases):
        buf += encode_command(argv)
        if len(buf) > 1 << 20:
            sink.write(buf)
            total += len(buf)
            buf = bytearray()
    if buf:
        sink.write(buf)
        total += len(buf)
    return total


