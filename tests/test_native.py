"""The compiled hot core (setup.py, protocol/_native.py, storage/_native.py).

Which mode runs is decided per package by its import shim; these tests hold the shim's
rules (a stale or unvouched extension never runs, RILL_PURE=1 forces the sources), check
that the modules really imported are the ones the mode names, and run the protocol and
storage unit tests again in the other mode in a subprocess.
"""

from __future__ import annotations

import ast
import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rill import persistence, protocol, server, storage
from rill.server.process import hot_core

from tests.support import RawClient, start_rill

ROOT = Path(__file__).resolve().parent.parent
NATIVES = [protocol.native, storage.native, persistence.native, server.native]
SO = importlib.machinery.EXTENSION_SUFFIXES[0]


def _function_source(path: Path, name: str) -> str:
    tree = ast.parse(path.read_text())
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    if ast.get_docstring(fn) is not None:
        fn.body = fn.body[1:]
    return ast.unparse(fn)


def test_the_shims_are_one_file_and_hash_as_the_build_does():
    """protocol/ and storage/ may not import each other, so each has its copy."""
    assert (ROOT / "protocol/_native.py").read_text() == (ROOT / "storage/_native.py").read_text()
    assert _function_source(ROOT / "setup.py", "source_hash") == _function_source(
        ROOT / "protocol/_native.py", "source_hash")


def test_imported_modules_are_what_the_mode_says():
    for native in NATIVES:
        for name, (py, ext) in native.modules.items():
            module = sys.modules.get(name) or __import__(name, fromlist=["_"])
            if native.compiled:
                assert module.__file__ == ext, name
                assert protocol._native.source_hash(py) == json.loads(
                    (Path(native.directory) / "_native.json").read_text())[py[len(native.directory) + 1:]]
            else:
                assert module.__file__ == py, name
    mode, compiled, problems = hot_core()
    # All hot packages run one way: compiled modules read each other's compiled types.
    assert len({native.mode for native in NATIVES}) == 1 and mode in ("compiled", "pure")
    assert (mode == "pure") == (not compiled)
    if os.environ.get("RILL_PURE") == "1":
        assert mode == "pure"


def test_annotations_check_nothing_in_either_mode():
    """``s: bytes`` is documentation under CPython; compiled, it must not refuse a
    bytearray either (the RDB writer hands listpack a bytearray string value)."""
    from rill.storage import listpack

    assert listpack.string_to_int64(bytearray(b"12")) == listpack.string_to_int64(b"12") == 12
    assert listpack.element(bytearray(b"abc")) == listpack.element(b"abc")


def test_the_pxd_files_reach_the_compiled_build():
    """Cython looks a module's .pxd up by its full name (rill/storage/stream/stream.pxd),
    not beside the .py in its folder; one it does not find types nothing, silently.
    Compiled, the class stream.pxd declares is an extension type (not a heap type);
    pure, it is an ordinary class."""
    from rill.storage.stream import stream

    heap_type = bool(stream._StreamCore.__flags__ & (1 << 9))  # Py_TPFLAGS_HEAPTYPE
    assert heap_type != storage.native.compiled
    # The Active-Active element state (storage/cells.pxd).
    from rill.storage import cells

    assert bool(cells.Cell.__flags__ & (1 << 9)) != storage.native.compiled
    # Every PEL and stream node index (storage/rax.pxd) and the group state whose fields
    # groups.pxd types as one (storage/stream/groups.pxd).
    from rill.storage import rax
    from rill.storage.stream import groups

    for cls in (rax.Rax, groups.NACK, groups.Consumer, groups.ConsumerGroup):
        assert bool(cls.__flags__ & (1 << 9)) != storage.native.compiled, cls
    # The databases and the keyspace whose counters every read bumps (storage/keyspace.pxd).
    from rill.storage import keyspace

    for cls in (keyspace.Database, keyspace.Keyspace):
        assert bool(cls.__flags__ & (1 << 9)) != storage.native.compiled, cls
    ks = keyspace.Keyspace(2)
    ks.hits += 1
    ks.signal_all = True
    assert (ks.hits, ks.signal_all, ks.lfu, ks.shared_integers, ks.lfu_log_factor) == (1, True, False, True, 10)
    # The effect records' decoder fills an extension type (protocol/effects.pxd).
    from rill.protocol import effects

    assert bool(effects.Effect.__flags__ & (1 << 9)) != protocol.native.compiled
    # The Active-Active engine (server/activeactive/engine.pxd cimports backlog.pxd).
    # The links (server/activeactive/links.pxd): a peer's fields and the flush's calls.
    from rill.server.activeactive import backlog, engine, links

    for cls in (engine.ActiveActive, backlog.Backlog, links.PeerLinks, links.Peer):
        assert bool(cls.__flags__ & (1 << 9)) != server.native.compiled, cls
    # The dispatcher's typed classes (server/fastpath.pxd cimports the other two).
    from rill.server import commandstats, connection, evict, fastpath, iostats
    from rill.server.activeactive import keyed, lists
    from rill.server.commands import stream_args, table

    # WriteEngine: the loop calls the engine's run_write in C (the engine subclasses it);
    # Lists: the engine reads its keys in C.
    for cls in (fastpath.ServerCore, fastpath.ClientCore, fastpath.WriteEngine, lists.Lists, table.Command,
                commandstats.CommandStats, evict.Evictor, keyed.Keyed, connection.Connection,
                connection.ReplyBatch, iostats.IOStats, stream_args.ReadArgs):
        assert bool(cls.__flags__ & (1 << 9)) != server.native.compiled, cls
    # A class attribute in a subclass would shadow a compiled field: instances would set
    # the attribute, and the compiled loop would go on reading the field.
    from rill.server.client import Client
    from rill.server.server import Server, Stats

    for sub, core in ((Server, fastpath.ServerCore), (Client, fastpath.ClientCore), (Stats, iostats.IOStats)):
        for name in core.__slots__:
            assert name not in vars(sub), (sub, name)
    # The class-wide settings stay settable at run time in both modes (CONFIG SET).
    saved = stream.Stream.node_max_entries
    stream.Stream.node_max_entries = 7
    try:
        assert stream.Stream().node_max_entries == 7
    finally:
        stream.Stream.node_max_entries = saved


def _package(tmp_path: Path, body: str = "X = 1\n") -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "hot.py").write_text(body)
    (pkg / ("hot" + SO)).write_bytes(b"not a real extension")
    return pkg


def test_fresh_extension_is_chosen(tmp_path, monkeypatch):
    monkeypatch.delenv("RILL_PURE", raising=False)
    pkg = _package(tmp_path)
    (pkg / "_native.json").write_text(json.dumps({"hot.py": protocol._native.source_hash(str(pkg / "hot.py"))}))
    native = protocol._native.Native("pkg", str(pkg))
    assert native.compiled and native.mode == "compiled" and not native.problem
    spec = native.find_spec("pkg.hot")
    assert isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)
    assert spec.origin == str(pkg / ("hot" + SO))
    monkeypatch.setenv("RILL_PURE", "1")
    native = protocol._native.Native("pkg", str(pkg))
    assert native.mode == "pure"
    assert isinstance(native.find_spec("pkg.hot").loader, importlib.machinery.SourceFileLoader)


@pytest.mark.parametrize("change", ["py", "pxd"])
def test_stale_extension_never_runs(tmp_path, monkeypatch, change):
    monkeypatch.delenv("RILL_PURE", raising=False)
    pkg = _package(tmp_path)
    (pkg / "_native.json").write_text(json.dumps({"hot.py": protocol._native.source_hash(str(pkg / "hot.py"))}))
    if change == "py":
        (pkg / "hot.py").write_text("X = 2\n")
    else:
        (pkg / "hot.pxd").write_text("cdef int X\n")
    native = protocol._native.Native("pkg", str(pkg))
    assert native.mode == "pure"
    assert "pkg.hot" in native.problem and "make native" in native.problem
    spec = native.find_spec("pkg.hot")
    assert isinstance(spec.loader, importlib.machinery.SourceFileLoader)
    assert spec.origin == str(pkg / "hot.py")


def _fresh_package(tmp_path: Path, name: str) -> Path:
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "hot.py").write_text("X = 1\n")
    (pkg / ("hot" + SO)).write_bytes(b"not a real extension")
    (pkg / "_native.json").write_text(json.dumps({"hot.py": protocol._native.source_hash(str(pkg / "hot.py"))}))
    return pkg


def test_one_stale_package_sends_every_hot_package_to_its_sources(tmp_path, monkeypatch):
    """A compiled module whose peer package ran as source refused to import (its cimported
    type's size differs), and rill-server failed at start-up."""
    monkeypatch.delenv("RILL_PURE", raising=False)
    a, b = _fresh_package(tmp_path, "a"), _fresh_package(tmp_path, "b")
    assert protocol._native.Native("a", str(a), (("b", str(b)),)).mode == "compiled"
    (b / "hot.py").write_text("X = 2\n")
    mine = protocol._native.Native("a", str(a), (("b", str(b)),))
    theirs = protocol._native.Native("b", str(b), (("a", str(a)),))
    assert mine.mode == theirs.mode == "pure"
    assert isinstance(mine.find_spec("a.hot").loader, importlib.machinery.SourceFileLoader)
    # Said once, by the stale package.
    assert not mine.problem and "b.hot older than the source" in theirs.problem
    assert "make native" in theirs.problem
    # A peer never built (no manifest: no compiler, a failed build) counts the same.
    (b / "_native.json").unlink()
    mine = protocol._native.Native("a", str(a), (("b", str(b)),))
    assert mine.mode == "pure" and "b not compiled" in mine.problem and "make native" in mine.problem


def test_the_hot_packages_are_setups():
    tree = ast.parse((ROOT / "setup.py").read_text())
    (hot,) = [n.value for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "HOT"]
    assert {k.value.rpartition(".")[2] for k in hot.keys} == set(protocol._native.HOT_PACKAGES)
    peers = dict(protocol._native.peers_of("rill.server", server.native.directory))
    assert peers == {n.package: n.directory for n in NATIVES if n is not server.native}
    assert protocol._native.peers_of("pkg", str(ROOT)) == ()


def test_unvouched_extension_never_runs(tmp_path, monkeypatch):
    """An extension the manifest does not name (built by hand, or by an older build)."""
    monkeypatch.delenv("RILL_PURE", raising=False)
    pkg = _package(tmp_path)
    native = protocol._native.Native("pkg", str(pkg))
    assert native.mode == "pure" and not native.problem
    spec = native.find_spec("pkg.hot")
    assert isinstance(spec.loader, importlib.machinery.SourceFileLoader)
    assert native.find_spec("pkg.absent") is None and native.find_spec("other.hot") is None


def test_mode_in_info_and_start_up_log():
    server = start_rill()
    try:
        c = RawClient(server.port)
        info = c.call("INFO", "server").decode()
        c.close()
    finally:
        server.stop()
    mode = hot_core()[0]  # the subprocess has this process's environment
    assert f"rill_mode:{mode}\r\n" in info
    assert f"Hot core: {mode}" in server.log()


def test_incr_bumps_an_unshared_counter_in_place():
    """Compiled, INCR rewrites the stored bytes when the database holds the only reference
    (strings.pxd's _c_bump_in_place); a second holder, or a longer number, gets a new
    object. Pure, every INCR stores a new object. tests/server/commands/test_strings.py
    checks that the holders never see a change."""
    from rill.server.commands import load_all
    from rill.server.server import Server as RillServer
    load_all()
    rill = RillServer()
    client = rill.new_client()
    rill.execute(client, [b"SET", b"k", b"%d" % 10])
    first = id(client.db.data[b"k"])
    rill.execute(client, [b"INCR", b"k"])
    assert (id(client.db.data[b"k"]) == first) == server.native.compiled
    held = client.db.data[b"k"]
    rill.execute(client, [b"INCR", b"k"])
    assert client.db.data[b"k"] is not held and held == b"11"
    del held
    rill.execute(client, [b"SET", b"k", b"%d" % 99])
    before = client.db.data[b"k"]
    rill.execute(client, [b"INCR", b"k"])
    assert client.db.data[b"k"] is not before and before == b"99"


def _other_mode_env() -> dict[str, str]:
    env = dict(os.environ)
    if hot_core()[0] == "pure" and os.environ.get("RILL_PURE") != "1":
        pytest.skip("no compiled build here (make native): only pure mode can run")
    if os.environ.get("RILL_PURE") == "1":
        env.pop("RILL_PURE")
    else:
        env["RILL_PURE"] = "1"
    return env


@pytest.mark.timeout(960)  # the subprocess's own limit (900 s) fails it first, with its output
def test_unit_tests_pass_in_the_other_mode():
    """The suite runs in this process's mode; the hot modules' own tests (every protocol
    and storage test, and persistence's nodes) run in the other. This is CI's pure-mode
    run too (.ci/run): one run of them in each mode, none twice."""
    env = _other_mode_env()
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-x",
         "tests/protocol", "tests/storage", "tests/persistence/test_nodes.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert " passed" in out.stdout
