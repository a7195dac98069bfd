"""Start-up loading with the listeners open, as Redis 7.0 does it: clients that connect
meanwhile get -LOADING except for the commands flagged ``loading``, INFO persistence
shows the progress, and a shutdown during the load saves nothing (the half-loaded
dataset must not replace the files it comes from). key-load-delay slows the load down
enough to watch it; the same RDB file is loaded by rill-server and redis-server."""

from __future__ import annotations

import os
import shutil
import signal

import pytest

from tests.support import (
    RawClient,
    RecordingTransport,
    StepLoop,
    encode_command,
    scratch_dir,
    start_redis,
    start_rill,
    wait_until,
)

KEYS = 5000
SLOW = ("--key-load-delay", "500", "--loading-process-events-interval-bytes", "1024")
LOADING = b"-LOADING Redis is loading the dataset in memory\r\n"


@pytest.fixture(scope="module")
def dump() -> str:
    """An RDB of KEYS string keys, written by rill."""
    with start_rill() as srv:
        c = RawClient(srv.port)
        c.send_raw(b"".join(encode_command([b"SET", b"key:%d" % i, b"value:%d" % i]) for i in range(KEYS)))
        for _ in range(KEYS):
            assert c.read_reply() == b"+OK\r\n"
        assert c.call("SAVE") == b"+OK\r\n"
        c.close()
        return os.path.join(srv.workdir, "dump.rdb")


def _start(kind: str, dump: str, *args: str):
    workdir = scratch_dir(f"{kind}-loading-")
    shutil.copy(dump, os.path.join(workdir, "dump.rdb"))
    start = start_rill if kind == "rill" else start_redis
    return start(*SLOW, *args, workdir=workdir, loading_ok=True)


def _info_fields(c: RawClient) -> dict[str, str]:
    text = c.call("INFO", "persistence").decode()
    return dict(line.split(":", 1) for line in text.split("\r\n")[1:] if ":" in line)


def _while_loading(kind: str, dump: str) -> dict:
    srv = _start(kind, dump)
    try:
        c = RawClient(srv.port)
        seen = {
            "ping": c.call("PING"),
            "get": c.call("GET", "key:1"),
            "set": c.call("SET", "a", "b"),
            "echo": c.call("ECHO", "x"),
            "config": c.call("CONFIG", "GET", "appendonly"),
            # what a load depends on is refused with the loading error; the rest is set
            "config_set": [c.call("CONFIG", "SET", "loglevel", "debug"), c.call("CONFIG", "SET", "dir", "asdf"),
                           c.call("CONFIG", "SET", "appendonly", "yes"),
                           c.call("CONFIG", "SET", "maxmemory", "0", "dir", "asdf")],
            "multi": [c.call("MULTI"), c.call("GET", "key:1"), c.call("EXEC")],
            "info": _info_fields(c),
        }
        wait_until(lambda: c.call("PING") == b"+PONG\r\n", timeout=60)
        seen["dbsize"] = c.call("DBSIZE")
        seen["get_after"] = c.call("GET", "key:1")
        seen["info_after"] = _info_fields(c)
        c.close()
    finally:
        srv.stop()
    return seen


def test_clients_get_loading_while_the_dataset_loads_as_redis_answers(dump):
    redis = _while_loading("redis", dump)
    rill = _while_loading("rill", dump)
    assert rill["ping"] == redis["ping"] == LOADING
    assert rill["get"] == rill["set"] == LOADING
    assert rill["config_set"][2] == LOADING  # (dir: the protected-config refusal comes first)
    for name in ("echo", "config", "config_set", "multi", "dbsize", "get_after"):
        assert rill[name] == redis[name], name
    assert rill["multi"][1] == LOADING  # refused while queueing: the EXEC aborts
    info = rill["info"]
    assert list(info) == list(redis["info"])  # the same fields, loading_* last
    assert info["loading"] == "1" and info["loading_total_bytes"] == str(os.path.getsize(dump))
    for name in ("loading_total_bytes", "loading_rdb_used_mem"):  # the file's size, its used-mem AUX
        assert info[name] == redis["info"][name], name
    assert 0 <= int(info["loading_loaded_bytes"]) < os.path.getsize(dump)
    assert float(info["loading_loaded_perc"]) < 100
    assert rill["dbsize"] == b":%d\r\n" % KEYS
    assert rill["info_after"]["loading"] == "0" and "loading_total_bytes" not in rill["info_after"]
    assert list(rill["info_after"]) == list(redis["info_after"])


@pytest.mark.parametrize("kind", ["rill", "redis"])
@pytest.mark.parametrize("how", ["SIGTERM", "SHUTDOWN"])
def test_a_shutdown_while_loading_saves_nothing(dump, kind, how):
    """With save points set, a shutdown would normally save; while loading it must not,
    or the half-loaded dataset would replace the file being loaded."""
    srv = _start(kind, dump, "--save", "900 1")
    c = RawClient(srv.port)
    assert c.call("PING") == LOADING
    if how == "SIGTERM":
        srv.proc.send_signal(signal.SIGTERM)
    else:
        c.send_raw(encode_command([b"SHUTDOWN"]))
    assert srv.proc.wait(30) == 0
    c.close()
    assert open(os.path.join(srv.workdir, "dump.rdb"), "rb").read() == open(dump, "rb").read()
    if kind == "rill" and how == "SIGTERM":
        assert "Received shutdown signal during loading, scheduling shutdown." in srv.log()


def test_the_aof_replay_pauses_for_the_loop_every_1024_commands(tmp_path):
    """In-process, the start-up steps driven by hand: between two chunks of replayed
    commands a client is answered (-LOADING), and its calls count in commandstats
    while the replayed ones do not."""
    from rill.server.commands import load_all
    from rill.server.config import Config
    from rill.server.connection import Connection
    from rill.server.server import Server

    load_all()
    aof_dir = tmp_path / "appendonlydir"
    aof_dir.mkdir()
    (aof_dir / "appendonly.aof.1.incr.aof").write_bytes(
        encode_command([b"SELECT", b"0"]) + encode_command([b"INCR", b"n"]) * 3000)
    (aof_dir / "appendonly.aof.manifest").write_text("file appendonly.aof.1.incr.aof seq 1 type i\n")
    cwd = os.getcwd()
    config = Config()
    for name, value in (("dir", str(tmp_path)), ("appendonly", "yes"), ("protected-mode", "no")):
        config.set(name, value, startup=True)
    os.chdir(cwd)  # setting dir moves into it, as Redis does
    server = Server(config)
    server.loop = StepLoop()
    transport = RecordingTransport()
    conn = Connection(server)
    conn.connection_made(transport)

    def call(*argv: bytes) -> bytes:
        transport.written.clear()
        conn.data_received(encode_command(argv))
        server.loop.run_iteration()
        return b"".join(transport.written)

    steps = server.startup_load()
    pauses = []
    value = None
    try:
        while True:
            step = steps.send(value)
            value = None
            if step is None:
                pauses.append(call(b"GET", b"n"))
            else:
                value = step()
    except StopIteration:
        pass
    assert pauses == [LOADING, LOADING]  # after 1024 and 2048 of the 3001 commands
    assert call(b"GET", b"n") == b"$4\r\n3000\r\n"
    stats = call(b"INFO", b"commandstats").decode()
    assert "cmdstat_get:calls=1,usec=" in stats and "rejected_calls=2,failed_calls=0" in stats
    assert "cmdstat_incr" not in stats and "cmdstat_select" not in stats
    server.persistence.at_shutdown()


@pytest.mark.parametrize("kind", ["rill", "redis"])
def test_server_state_refuses_nothing_the_aof_replays(kind):
    """The commands replayed from the AOF are not clients' commands: a server that
    refuses writes (min-replicas-to-write with no replica, maxmemory noeviction already
    full) still loads all of them, as Redis's loader calls each one directly."""
    start = start_rill if kind == "rill" else start_redis
    with start("--appendonly", "yes") as srv:
        c = RawClient(srv.port)
        c.call("SET", "a", "1")
        c.call("MULTI")
        c.call("INCR", "n")
        c.call("EXEC")
        c.close()
    with start("--appendonly", "yes", "--min-replicas-to-write", "1", "--maxmemory", "1",
               workdir=srv.workdir) as again:
        c = RawClient(again.port)
        assert c.call("DBSIZE") == b":2\r\n"
        assert c.call("GET", "n") == b"$1\r\n1\r\n"
        assert c.call("SET", "b", "2").startswith(b"-OOM ")  # clients are refused
        assert c.call("DEBUG", "LOADAOF") == b"+OK\r\n"  # the same through DEBUG LOADAOF
        assert c.call("DBSIZE") == b":2\r\n"
        assert c.call("GET", "n") == b"$1\r\n1\r\n"
        c.close()
