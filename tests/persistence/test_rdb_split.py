"""The split foreground save: the same file as a single pass, whatever the helper does."""

from __future__ import annotations

import io
import os

import pytest
from rill.persistence import rdb, rdb_split
from rill.storage.hash import HashValue
from rill.storage.list import ListValue
from rill.storage.stream import Stream, make_id


def _dataset(n: int, seed: int) -> tuple[dict, dict]:
    data: dict = {}
    expires: dict = {}
    for i in range(n):
        key = b"k:%d:%d" % (seed, i)
        r = i % 5
        if r == 0:
            data[key] = b"%d" % i
        elif r == 1:
            data[key] = b"value-%d" % i * (1 + i % 7)
        elif r == 2:
            data[key] = ListValue([b"a", b"%d" % i, b"c" * (i % 90)])
        elif r == 3:
            h = HashValue()
            h.put(b"f", b"v%d" % i)
            data[key] = h
        else:
            s = Stream()
            s.add([b"f", b"%d" % i], make_id(i + 1, 0))
            data[key] = s
        if i % 3 == 0:
            expires[key] = 4102444800000 + i
    return data, expires


@pytest.fixture
def dbs():
    return [(0, *_dataset(2001, 0)), (3, *_dataset(17, 3)), (5, {}, {}), (9, *_dataset(1000, 9))]


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch):
    monkeypatch.setattr(rdb.time, "time", lambda: 1_700_000_000.0)  # the ctime aux field


def _serial(dbs) -> bytes:
    buf = io.BytesIO()
    rdb.save_file(buf, dbs, rdb.SaveOptions())
    return buf.getvalue()


@pytest.fixture
def helper_reports(monkeypatch):
    """What each wait for the helper found: its sections, or [] when it failed."""
    reports: list = []
    real = rdb_split._wait_for_child

    def spy(*args):
        reports.append(real(*args))
        return reports[-1]

    monkeypatch.setattr(rdb_split, "_wait_for_child", spy)
    return reports


def test_split_save_writes_the_same_bytes_as_a_single_pass(dbs, tmp_path, helper_reports):
    scratch = str(tmp_path / "scratch.rdb")
    buf = io.BytesIO()
    rdb_split.save_file_split(buf, dbs, rdb.SaveOptions(), scratch, min_keys=1)
    assert len(helper_reports) == 1 and len(helper_reports[0]) == 3  # the child encoded 3 dbs' halves
    assert buf.getvalue() == _serial(dbs)
    assert not os.path.exists(scratch)
    loaded = rdb.load(buf.getvalue())
    assert loaded.keys_loaded == sum(len(d) for _, d, _ in dbs)


def test_a_helper_that_fails_leaves_the_work_to_the_parent(dbs, tmp_path, helper_reports):
    # The child cannot create its scratch file (no such directory): it exits 1.
    scratch = str(tmp_path / "missing" / "scratch.rdb")
    buf = io.BytesIO()
    rdb_split.save_file_split(buf, dbs, rdb.SaveOptions(), scratch, min_keys=1)
    assert helper_reports == [[]]
    assert buf.getvalue() == _serial(dbs)


def test_small_datasets_are_saved_in_one_pass(dbs, tmp_path, monkeypatch):
    monkeypatch.setattr(os, "fork", lambda: pytest.fail("forked for a small dataset"))
    buf = io.BytesIO()
    rdb_split.save_file_split(buf, dbs, rdb.SaveOptions(), str(tmp_path / "s.rdb"))
    assert buf.getvalue() == _serial(dbs)


def test_a_failed_fork_falls_back_to_one_pass(dbs, tmp_path, monkeypatch):
    def no_fork():
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    buf = io.BytesIO()
    rdb_split.save_file_split(buf, dbs, rdb.SaveOptions(), str(tmp_path / "s.rdb"), min_keys=1)
    assert buf.getvalue() == _serial(dbs)
