"""The AOF pieces without a server: manifest rules, the command stream, the writer, the rewrite."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rill.persistence import aof
from rill.storage.list import ListValue
from rill.storage.stream import Stream, make_id


# -- manifest -----------------------------------------------------------------------------------
def test_manifest_round_trip_and_order():
    text = (
        "file appendonly.aof.2.incr.aof seq 2 type i\n"
        "# a comment\n"
        "file appendonly.aof.1.base.rdb seq 1 type b\n"
        "file appendonly.aof.1.incr.aof seq 1 type h\n"
        "file appendonly.aof.3.incr.aof seq 3 type i extra value\n"
    )
    m = aof.Manifest.parse(text)
    assert m.base.name == "appendonly.aof.1.base.rdb" and m.base_seq == 1
    assert [f.name for f in m.incrs] == ["appendonly.aof.2.incr.aof", "appendonly.aof.3.incr.aof"]
    assert m.incr_seq == 3 and [f.name for f in m.history] == ["appendonly.aof.1.incr.aof"]
    assert m.format() == (
        "file appendonly.aof.1.base.rdb seq 1 type b\n"
        "file appendonly.aof.1.incr.aof seq 1 type h\n"
        "file appendonly.aof.2.incr.aof seq 2 type i\n"
        "file appendonly.aof.3.incr.aof seq 3 type i\n"
    )
    assert [f.name for f in m.files()] == [m.base.name, *(f.name for f in m.incrs)]


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ("file a seq 1 type b\n\n", "format"),  # a blank line
        ("file a seq 1 type b", "too long line"),  # no newline: fgets's line did not end
        ("file a seq 1 type b\n" + "x" * 1030 + "\n", "too long line"),
        ("file a seq 0 type b\n", "format"),
        ("file a seq x type b\n", "format"),  # atoll: 0
        ("file a seq 1 type \"\"\n", "format"),
        ("file a\\b seq 1 type b\n", "path"),
        ("file a seq 1\n", "format"),
        ("file a seq 1 type b extra\n", "format"),
        ("file a seq 1 type b\nfile b seq 2 type b\n", "duplicate base"),
        ("file a seq 2 type i\nfile b seq 2 type i\n", "non-monotonic"),
        ("file dir/a seq 1 type b\n", "path"),
        ("file a seq 1 type x\n", "Unknown"),
        ('file "unterminated seq 1 type b\n', "format"),
    ],
)
def test_manifest_rules(text, message):
    with pytest.raises(aof.ManifestError, match=message):
        aof.Manifest.parse(text)


def test_manifest_reads_as_redis_reads_it():
    """Only a file without any line is empty (comments are lines); keys match in any
    case and a repeated one's last value counts; seq is atoll's number, type its value's
    first character; an overlong comment's rest is read as a line of its own."""
    assert aof.Manifest.parse("# only a comment\n").files() == []
    m = aof.Manifest.parse("FILE x SEQ 3abc TYPE base file y\nfile z seq 1 type h Seq 2\n")
    assert m.base == aof.AofFile("y", 3, "b") and m.history == [aof.AofFile("z", 2, "h")]
    with pytest.raises(aof.ManifestError, match="format") as e:
        aof.Manifest.parse("#" + "c" * 1030 + "\n")
    assert (e.value.lineno, e.value.line) == (2, "c" * 7)


def test_manifest_quotes_odd_names():
    m = aof.Manifest(base=aof.AofFile("my file\n.rdb", 1, "b"), base_seq=1)
    text = m.format()
    assert text == 'file "my file\\n.rdb" seq 1 type b\n'
    assert aof.Manifest.parse(text).base.name == "my file\n.rdb"


def test_rewrite_naming_and_history():
    m = aof.Manifest()
    assert m.new_base("appendonly.aof", True) == "appendonly.aof.1.base.rdb"
    assert m.new_incr("appendonly.aof") == "appendonly.aof.1.incr.aof"
    # a rewrite starts: appends move to a new incr file ...
    assert m.new_incr("appendonly.aof") == "appendonly.aof.2.incr.aof"
    # ... and when it ends, the new base replaces the old, older incrs become history
    assert m.new_base("appendonly.aof", False) == "appendonly.aof.2.base.aof"
    m.rewritten(appending=True)
    assert [f.name for f in m.incrs] == ["appendonly.aof.2.incr.aof"]
    # Redis's order: the incrs that became history, then the old base
    assert [f.name for f in m.history] == ["appendonly.aof.1.incr.aof", "appendonly.aof.1.base.rdb"]
    assert all(f.kind == "h" for f in m.history)
    assert m.format() == (
        "file appendonly.aof.2.base.aof seq 2 type b\n"
        "file appendonly.aof.1.incr.aof seq 1 type h\n"
        "file appendonly.aof.1.base.rdb seq 1 type h\n"
        "file appendonly.aof.2.incr.aof seq 2 type i\n"
    )


def test_rewrite_with_the_aof_off_keeps_no_incr():
    """With nothing appended to, every incr is history after a rewrite: the new base
    already holds what they did, and replaying one on top of it would change the data."""
    m = aof.Manifest()
    m.new_base("appendonly.aof", True)
    m.new_incr("appendonly.aof")
    m.new_incr("appendonly.aof")
    m.new_base("appendonly.aof", False)
    m.rewritten(appending=False)
    assert m.incrs == []
    assert [f.name for f in m.files()] == ["appendonly.aof.2.base.aof"]
    assert [f.name for f in m.history] == [
        "appendonly.aof.1.incr.aof", "appendonly.aof.2.incr.aof", "appendonly.aof.1.base.rdb"]
    assert m.incr_seq == 2  # a later incr still gets a new number


def test_write_manifest_is_atomic(tmp_path):
    m = aof.Manifest()
    m.new_base("appendonly.aof", True)
    aof.write_manifest(str(tmp_path), "appendonly.aof", m)
    assert sorted(os.listdir(tmp_path)) == ["appendonly.aof.manifest"]
    assert (tmp_path / "appendonly.aof.manifest").read_text() == "file appendonly.aof.1.base.rdb seq 1 type b\n"


# -- command stream ----------------------------------------------------------------------------------
argvs = st.lists(st.lists(st.binary(max_size=20), min_size=1, max_size=5), max_size=10)


@settings(max_examples=200, deadline=None)
@given(argvs)
def test_commands_round_trip_and_every_cut_is_a_clean_truncation(commands):
    data = b"".join(aof.encode_command(a) for a in commands)
    assert list(aof.CommandParser(data)) == commands
    ends = [0]
    for a in commands:
        ends.append(ends[-1] + len(aof.encode_command(a)))
    for cut in range(len(data)):
        p = aof.CommandParser(data[:cut])
        got = []
        try:
            while (a := p.next()) is not None:
                got.append(a)
            assert cut in ends
        except aof.AofTruncated as e:
            assert e.valid_up_to == max(x for x in ends if x <= cut)
        assert got == commands[: len(got)]


def test_annotations_are_skipped():
    data = b"#TS:1700000000\r\n" + aof.encode_command([b"SET", b"k", b"v"])
    assert list(aof.CommandParser(data)) == [[b"SET", b"k", b"v"]]


@pytest.mark.parametrize(
    "data, offset",
    [
        (b"SET k v\r\n", 0),
        (b"*1\r\n$3\r\nSET\r\n*x\r\n", 13),
        (b"*2\r\n$3\r\nGET\r\n+k\r\n", 13),
        (b"*1\r\n$3\r\nSETX\r\n", 11),
        (b"*0\r\n", 0),
    ],
)
def test_format_errors_are_not_truncations(data, offset):
    with pytest.raises(aof.AofFormatError) as e:
        list(aof.CommandParser(data))
    assert e.value.offset == offset


# -- writer ------------------------------------------------------------------------------------------
def test_writer_selects_db_and_appends(tmp_path):
    path = str(tmp_path / "a.aof")
    w = aof.AofWriter(path, "always")
    seen = []
    w.on_data = lambda: seen.append(1)
    w.feed([(0, [b"SET", b"a", b"1"])])
    w.feed([(0, [b"SET", b"b", b"2"]), (3, [b"DEL", b"c"])])
    assert len(seen) == 1  # called when the buffer went from empty to non-empty
    assert w.flush() and not w.unsynced
    w.selected_db = -1  # a new file starts with SELECT again
    w.feed([(3, [b"DEL", b"d"])])
    w.close()
    data = open(path, "rb").read()
    assert list(aof.CommandParser(data)) == [
        [b"SELECT", b"0"], [b"SET", b"a", b"1"], [b"SET", b"b", b"2"],
        [b"SELECT", b"3"], [b"DEL", b"c"], [b"SELECT", b"3"], [b"DEL", b"d"],
    ]
    w2 = aof.AofWriter(path, "no")
    assert w2.size == len(data)
    w2.close()


def test_everysec_hands_fsync_to_the_background(tmp_path):
    w = aof.AofWriter(str(tmp_path / "b.aof"), "everysec")
    w.feed([(0, [b"PING"])])
    w.last_fsync -= 2
    assert w.flush()
    assert not w.unsynced  # handed over
    w.feed([(0, [b"PING"])])
    assert w.flush() and w.unsynced  # less than a second later: not yet
    w.close()


def test_a_failed_write_keeps_the_buffer_and_the_error(tmp_path):
    """/dev/full refuses every write with ENOSPC: the real kernel error path."""
    w = aof.AofWriter("/dev/full", "everysec")
    w.feed([(0, [b"SET", b"a", b"1"])])
    pending = bytes(w.buf)
    assert not w.flush()
    assert w.write_error.errno == errno.ENOSPC and w.error is w.write_error
    assert w.short_write is None and bytes(w.buf) == pending and w.size == 0
    w.fd, full = os.open(str(tmp_path / "c.aof"), os.O_WRONLY | os.O_CREAT | os.O_APPEND), w.fd
    os.close(full)
    assert w.flush() and w.write_error is None and w.error is None  # a later write clears it
    w.close()
    assert open(tmp_path / "c.aof", "rb").read() == pending


_SHORT_WRITE = """
import json, os, resource, sys
from rill.persistence import aof
limit, path, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
w = aof.AofWriter(path, "no")
w.feed([(0, [b"SET", b"k", b"x" * 100])])
assert w.flush()
before = w.size
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
if mode == "no-truncate":
    def refuse(fd, size):
        raise OSError(13, os.strerror(13))
    os.ftruncate = refuse
w.feed([(0, [b"SET", b"k", b"y" * 100])])
ok = w.flush()
print(json.dumps({"ok": ok, "errno": w.write_error.errno, "short": w.short_write,
                  "truncate_errno": w.truncate_error.errno if w.truncate_error else None,
                  "before": before, "size": w.size, "on_disk": os.path.getsize(path),
                  "buffered": len(w.buf)}))
"""


@pytest.mark.parametrize("mode", ["truncate", "no-truncate"])
def test_a_short_write_is_undone_or_kept_as_a_valid_prefix(tmp_path, mode):
    """A real short write: RLIMIT_FSIZE lets the kernel take only part of the buffer
    (Python ignores SIGXFSZ, so the next write fails with EFBIG). Redis truncates the
    file back and keeps the whole buffer, reporting ENOSPC; if even that fails, the
    part that landed stays and only the rest is retried."""
    path = str(tmp_path / "d.aof")
    command_size = len(aof.encode_command([b"SET", b"k", b"x" * 100]))
    limit = len(aof.select_command(0)) + command_size + 40  # 40 bytes of the second command fit
    out = subprocess.run([sys.executable, "-c", _SHORT_WRITE, str(limit), path, mode],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    r = json.loads(out)
    assert r["ok"] is False and r["errno"] == errno.ENOSPC and r["short"] == [40, command_size]
    if mode == "truncate":
        assert r["truncate_errno"] is None
        assert r["on_disk"] == r["size"] == r["before"] and r["buffered"] == command_size
        assert list(aof.CommandParser(open(path, "rb").read())) == [
            [b"SELECT", b"0"], [b"SET", b"k", b"x" * 100]]
    else:
        assert r["truncate_errno"] == errno.EACCES
        assert r["on_disk"] == r["size"] == r["before"] + 40 and r["buffered"] == command_size - 40


def test_a_failed_background_fsync_is_reported_and_retried(tmp_path, monkeypatch):
    """bio's fsync failing (EIO here) stops writes like a failed write does, until a
    later fsync succeeds; the writer tries again a second later even with nothing new
    written, since the data it holds is still not known to be durable."""
    w = aof.AofWriter(str(tmp_path / "e.aof"), "everysec")
    changes = threading.Semaphore(0)
    w.on_fsync_status = changes.release
    real = os.fdatasync

    def failing(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fdatasync", failing)
    w.feed([(0, [b"PING"])])
    w.last_fsync -= 2
    assert w.flush()
    assert changes.acquire(timeout=10)
    assert w.fsync_error.errno == errno.EIO and w.error is w.fsync_error and w.unsynced
    monkeypatch.setattr(os, "fdatasync", real)
    w.last_fsync -= 2
    assert w.flush() and not w.buf  # nothing to write, yet the fsync is tried again
    assert changes.acquire(timeout=10)
    assert w.fsync_error is None and w.error is None
    w.close()


def test_einval_from_a_background_fsync_is_no_error():
    """fdatasync on a device that cannot sync (EINVAL) loses nothing: bio ignores it."""
    w = aof.AofWriter("/dev/null", "everysec")
    w.feed([(0, [b"PING"])])
    w.last_fsync -= 2
    assert w.flush()
    thread = aof._fsync_thread
    deadline = time.monotonic() + 10
    while thread.pending() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert w.fsync_error is None and not w.unsynced
    w.close(sync=False)


def test_a_failed_always_fsync_is_kept(tmp_path, monkeypatch):
    w = aof.AofWriter(str(tmp_path / "f.aof"), "always")
    w.feed([(0, [b"PING"])])

    def failing(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fdatasync", failing)
    assert not w.flush()
    assert w.write_error is None and w.fsync_error.errno == errno.EIO and w.unsynced
    monkeypatch.undo()
    assert w.flush() and w.fsync_error is None and not w.unsynced
    w.close()


# -- rewrite -------------------------------------------------------------------------------------------
def test_stream_rewrite_matches_redis_shape():
    s = Stream()
    for i in range(1, 4):
        s.add([b"f", b"%d" % i], make_id(i, 0))
    s.delete(make_id(3, 0))
    g = s.create_group(b"g", make_id(2, 0), 2)
    alice = g.create_consumer(b"alice", 10)
    g.create_consumer(b"bob", 11)
    g.deliver(make_id(1, 0), alice, 1234)
    cmds = list(aof.rewrite_commands([(0, {b"s": s}, {b"s": 99})]))
    assert cmds == [
        [b"SELECT", b"0"],
        [b"XADD", b"s", b"1-0", b"f", b"1"],
        [b"XADD", b"s", b"2-0", b"f", b"2"],
        [b"XSETID", b"s", b"3-0", b"ENTRIESADDED", b"3", b"MAXDELETEDID", b"3-0"],
        [b"XGROUP", b"CREATE", b"s", b"g", b"2-0", b"ENTRIESREAD", b"2"],
        [b"XCLAIM", b"s", b"g", b"alice", b"0", b"1-0", b"TIME", b"1234", b"RETRYCOUNT", b"1", b"JUSTID", b"FORCE"],
        [b"XGROUP", b"CREATECONSUMER", b"s", b"g", b"bob"],
        [b"PEXPIREAT", b"s", b"99"],
    ]
    empty = Stream()
    assert list(aof.rewrite_commands([(1, {b"e": empty}, {})]))[1] == [
        b"XADD", b"e", b"MAXLEN", b"0", b"0-1", b"x", b"y"]


def test_list_and_string_rewrite_chunks():
    big = ListValue(b"%d" % i for i in range(130))
    cmds = list(aof.rewrite_commands([(0, {b"l": big, b"k": bytearray(b"v")}, {}), (2, {}, {})]))
    assert cmds[0] == [b"SELECT", b"0"]
    assert [len(c) - 2 for c in cmds[1:4]] == [64, 64, 2] and cmds[1][:2] == [b"RPUSH", b"l"]
    assert cmds[4] == [b"SET", b"k", b"v"]
    assert len(cmds) == 5  # empty db 2 emits nothing
