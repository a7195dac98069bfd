"""The Docker image (docker/): its Dockerfile, entrypoint, healthcheck and Compose file.

No container engine runs here, so the image's parts are run directly: the entrypoint
script with a fake ``rill-server`` on PATH that records how it was started (and, as root,
with the real one, into a root-owned data directory), and the healthcheck against real
rill servers on non-default ports and against tiny fake servers (a -LOADING one among
them). The Dockerfile and the Compose file are read statically.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from tests.support import (
    RawClient,
    ServerProcess,
    free_port,
    scratch_dir,
    start_rill,
    unavailable,
    wait_until,
)

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
ENTRYPOINT = DOCKER / "docker-entrypoint.sh"
HEALTHCHECK = DOCKER / "healthcheck.py"
RILL_UID = RILL_GID = 999  # the image's user, which the entrypoint drops to
OTHER_UID = 4321  # some --user


def need_root() -> None:
    """The privilege drop can only be exercised as root; CI runs as root."""
    if os.geteuid() != 0:
        unavailable("root", "the entrypoint's root start; CI runs as root")


# -- the Dockerfile ----------------------------------------------------------------------


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = (DOCKER / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#")))
    out = []
    for line in text.splitlines():
        if line.strip():
            instr, _, rest = line.strip().partition(" ")
            out.append((instr.upper(), rest.strip()))
    return out


def _final_stage() -> list[tuple[str, str]]:
    steps = _dockerfile()
    last_from = max(i for i, (ins, _) in enumerate(steps) if ins == "FROM")
    return steps[last_from:]


def _exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value)
    return value


def _copies() -> dict[str, str]:
    """The final stage's COPY destinations by source (files from the build context)."""
    out = {}
    for ins, args in _final_stage():
        if ins == "COPY" and not args.startswith("--from"):
            src, dest = args.split()
            out[src] = dest
    return out


def test_dockerfile_is_conventional():
    steps = _dockerfile()
    known = {"FROM", "WORKDIR", "COPY", "RUN", "ENV", "EXPOSE", "VOLUME", "HEALTHCHECK", "CMD", "ARG",
             "LABEL", "ENTRYPOINT"}
    assert all(ins in known for ins, _ in steps), steps
    final = dict(_final_stage())
    assert re.fullmatch(r"python:3\.11-slim(-\w+)?", final["FROM"])
    assert final["EXPOSE"] == "6379"
    assert final["VOLUME"] == "/data"
    assert final["WORKDIR"] == "/data"
    # No USER: as in the official redis image, the entrypoint starts as root to give /data
    # to the server's user, whose numbers are the entrypoint's.
    assert "USER" not in final
    assert f"--uid {RILL_UID} " in final["RUN"] and f"--gid {RILL_GID} " in final["RUN"]
    script = ENTRYPOINT.read_text()
    assert f"rill_uid={RILL_UID}\n" in script and f"rill_gid={RILL_GID}\n" in script
    assert re.search(r"chown rill:rill /data", final["RUN"])
    # The package is installed with pip from the repository (build context = repo root).
    assert any(ins == "RUN" and "pip wheel" in args and args.rstrip().endswith(" .") for ins, args in steps)
    assert "pip install /wheels/*.whl" in final["RUN"]


def test_entrypoint_healthcheck_and_cmd_are_the_scripts_here():
    final = dict(_final_stage())
    copies = _copies()
    entry = _exec_form(final["ENTRYPOINT"])
    assert copies["docker/docker-entrypoint.sh"] == "/usr/local/bin/" + entry[0] and len(entry) == 1
    options, _, check = final["HEALTHCHECK"].partition("CMD ")
    assert copies["docker/healthcheck.py"] == "/usr/local/bin/" + _exec_form(check)[0]
    for opt in ("interval", "timeout", "start-period", "retries"):
        assert re.search(rf"--{opt}=\d+s?\b", options), opt
    assert "chmod 755 /usr/local/bin/docker-entrypoint.sh /usr/local/bin/rill-healthcheck" in final["RUN"]
    assert _exec_form(final["CMD"]) == ["rill-server"]
    # Executable in the repository too, for `docker run --entrypoint` experiments and these tests.
    for script in (ENTRYPOINT, HEALTHCHECK):
        assert script.stat().st_mode & stat.S_IXUSR
    assert ENTRYPOINT.read_text().startswith("#!/bin/sh\n")  # Debian slim has sh, not bash


def test_dockerignore_keeps_what_the_build_needs():
    lines = [ln.strip() for ln in (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    for needed in ["pyproject.toml", "README.md", "server", "protocol", "storage", "persistence", "pipeline"]:
        assert needed not in lines
    assert ".venv" in lines and ".git" in lines
    # docker/ is left out, except the two scripts the image copies (exceptions come after).
    for src in _copies():
        assert f"!{src}" in lines[lines.index("docker"):], src


def test_compose_example():
    compose = yaml.safe_load((DOCKER / "compose.yml").read_text())
    rill = compose["services"]["rill"]
    context = (DOCKER / rill["build"]["context"]).resolve()
    assert context == ROOT
    assert (context / rill["build"]["dockerfile"]).resolve() == DOCKER / "Dockerfile"
    # Options only, as after the image name: the entrypoint makes them rill-server's.
    assert rill["command"][0].startswith("--")
    assert any(str(p).endswith("6379:6379") for p in rill["ports"])
    assert any(str(v).endswith(":/data") for v in rill["volumes"])
    for v in rill["volumes"]:
        assert str(v).split(":")[0] in (compose.get("volumes") or {})
    assert compose["services"]["client"]["depends_on"]["rill"]["condition"] == "service_healthy"


# -- the entrypoint ----------------------------------------------------------------------

# Records who runs it, with what umask, where, and its arguments (NUL-separated).
FAKE_SERVER = r"""#!/bin/sh
{
    printf 'uid=%s\0gid=%s\0groups=%s\0umask=%s\0cwd=%s\0' "$(id -u)" "$(id -g)" "$(id -G)" "$(umask)" "$(pwd)"
    for a in "$@"; do printf 'arg=%s\0' "$a"; done
} > "$FAKE_OUT"
"""


class Image:
    """A stand-in for the image's filesystem: the entrypoint and a fake rill-server in a bin
    directory, a data directory as the working directory; all reachable by any uid."""

    def __init__(self) -> None:
        self.base = Path(scratch_dir("entrypoint-"))
        self.base.chmod(0o755)
        self.bin = self.base / "bin"
        self.bin.mkdir(mode=0o755)
        self.data = self.base / "data"
        self.data.mkdir()
        self.out = self.base / "out"
        self.out.mkdir()
        self.out.chmod(0o777)
        self.entrypoint = self.bin / "docker-entrypoint.sh"
        shutil.copy(ENTRYPOINT, self.entrypoint)
        self.entrypoint.chmod(0o755)
        fake = self.bin / "rill-server"
        fake.write_text(FAKE_SERVER)
        fake.chmod(0o755)

    def run(self, *args: str, uid: int | None = None, umask: int = 0o022) -> subprocess.CompletedProcess:
        """Run the entrypoint as the container would: ``uid`` None is the default (root here
        when the tests run as root, else whoever runs them)."""
        env = {"PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin", "FAKE_OUT": str(self.out / "record")}
        kwargs: dict = {}
        if uid is not None and uid != os.geteuid():
            kwargs = {"user": uid, "group": uid, "extra_groups": []}
        return subprocess.run([str(self.entrypoint), *args], cwd=self.data, env=env, umask=umask,
                              capture_output=True, text=True, timeout=30, **kwargs)

    def record(self) -> dict:
        """What the fake rill-server saw: uid, gid, groups, umask, cwd, and its args."""
        fields = (self.out / "record").read_text().split("\0")[:-1]
        rec: dict = {"args": []}
        for f in fields:
            key, _, value = f.partition("=")
            if key == "arg":
                rec["args"].append(value)
            else:
                rec[key] = value
        return rec


@pytest.fixture
def image() -> Image:
    return Image()


def _starts(image: Image, *args: str, uid: int | None = None) -> list[str]:
    done = image.run(*args, uid=uid)
    assert done.returncode == 0, done.stderr
    return image.record()["args"]


@pytest.mark.parametrize("uid", [None, OTHER_UID], ids=["default", "--user"])
@pytest.mark.parametrize("args, server_args", [
    # options after the image name (docker run rill --requirepass x)
    (["--requirepass", "x"], ["--protected-mode", "no", "--requirepass", "x"]),
    (["--port", "7000", "--save", ""], ["--protected-mode", "no", "--port", "7000", "--save", ""]),
    # a config file after the image name: it decides about protected mode
    (["/etc/rill/rill.conf", "--port", "7000"], ["/etc/rill/rill.conf", "--port", "7000"]),
    (["rill.conf"], ["rill.conf"]),
    # rill-server named (docker run rill rill-server --port 7000), and the image's CMD
    (["rill-server", "--port", "7000"], ["--protected-mode", "no", "--port", "7000"]),
    (["rill-server"], ["--protected-mode", "no"]),
    (["rill-server", "/etc/rill/rill.conf"], ["/etc/rill/rill.conf"]),
    # what rill-server answers without starting is left alone
    (["rill-server", "--version"], ["--version"]),
    (["-v"], ["-v"]),
    (["rill-server", "--help"], ["--help"]),
    # an explicit choice comes later and wins
    (["--protected-mode", "yes"], ["--protected-mode", "no", "--protected-mode", "yes"]),
])
def test_arguments_reach_rill_server_as_in_the_redis_image(image, args, server_args, uid):
    if uid is not None:
        need_root()  # to become another user at all
    assert _starts(image, *args, uid=uid) == server_args


@pytest.mark.parametrize("args, protected, port", [
    (["--port", "7000"], "no", "7000"),
    (["--protected-mode", "yes", "--port", "7000"], "yes", "7000"),
    (["rill-server"], "no", "6379"),
])
def test_the_command_lines_it_makes_mean_what_they_should(image, args, protected, port):
    """Parsed as rill-server parses them: the inserted default, then the user's options."""
    from rill.server.config import Config

    config = Config()
    config.load_argv(_starts(image, *args))
    assert (config["protected-mode"], config["port"]) == (protected, port)


def test_as_root_it_hands_the_data_directory_over_and_drops_to_rill(image):
    need_root()
    (image.data / "dump.rdb").write_bytes(b"x")
    (image.data / "appendonlydir").mkdir()
    (image.data / "appendonlydir" / "a.aof").write_bytes(b"y")
    os.chown(image.data, 0, 0)
    assert _starts(image, "--appendonly", "yes") == ["--protected-mode", "no", "--appendonly", "yes"]
    rec = image.record()
    assert (rec["uid"], rec["gid"], rec["groups"]) == (str(RILL_UID), str(RILL_GID), str(RILL_GID))
    assert rec["cwd"] == str(image.data)
    for path in [image.data, *image.data.rglob("*")]:
        st = path.lstat()
        assert (st.st_uid, st.st_gid) == (RILL_UID, RILL_GID), path


@pytest.mark.parametrize("uid", [None, OTHER_UID], ids=["default", "--user"])
def test_umask_0077_unless_one_was_chosen(image, uid):
    if uid is not None:
        need_root()
    image.run("--port", "7000", uid=uid)
    assert image.record()["umask"] == "0077"
    image.run("--port", "7000", uid=uid, umask=0o002)
    assert image.record()["umask"] == "0002"


def test_with_user_it_neither_chowns_nor_changes_user(image):
    need_root()
    (image.data / "dump.rdb").write_bytes(b"x")
    image.data.chmod(0o777)
    _starts(image, "--port", "7000", uid=OTHER_UID)
    assert image.record()["uid"] == str(OTHER_UID)
    assert (image.data / "dump.rdb").stat().st_uid == 0


def test_other_commands_run_as_given(image):
    (image.data / "keep").write_bytes(b"x")
    done = image.run("sh", "-c", 'printf "%s|%s|%s" "$(id -u)" "$0" "$1"', "first", "second")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{os.geteuid()}|first|second"
    assert not (image.out / "record").exists()  # rill-server never ran
    assert (image.data / "keep").stat().st_uid == os.geteuid()  # nothing was chowned
    assert image.run("sh", "-c", "exit 3").returncode == 3


def test_a_data_directory_it_cannot_hand_over_is_reported_not_fatal(image, tmp_path):
    """A read-only mount cannot be chowned: the server starts anyway (and logs its own
    errors if it must write), as a read-only dataset can be served."""
    need_root()
    (image.data / "dump.rdb").write_bytes(b"x")
    subprocess.run(["mount", "--bind", "-o", "ro", str(image.data), str(image.data)], check=True)
    try:
        done = image.run("--port", "7000")
    finally:
        subprocess.run(["umount", str(image.data)], check=True)
    assert done.returncode == 0, done.stderr
    assert "docker-entrypoint: could not give" in done.stderr
    assert image.record()["uid"] == str(RILL_UID)


def _runs_as_rill(argv: list[str]) -> bool:
    """Whether uid 999 can run this checkout's Python (a home directory may be closed to it)."""
    probe = subprocess.run(argv, user=RILL_UID, group=RILL_GID, extra_groups=[], capture_output=True,
                           timeout=60)
    return probe.returncode == 0


def test_as_root_a_root_owned_data_directory_is_saved_to_by_the_real_server(image):
    """The finding: a bind-mounted /data owned by root made every save fail. Through the
    entrypoint, the real rill-server gets the directory, saves, and is healthy."""
    need_root()
    rill_server = Path(sys.executable).with_name("rill-server")
    if not _runs_as_rill([str(rill_server), "--version"]):
        unavailable(f"a checkout uid {RILL_UID} can run", f"{rill_server}: a parent directory is closed to it")
    (image.bin / "rill-server").unlink()
    (image.bin / "rill-server").symlink_to(rill_server)
    image.data.chmod(0o755)
    (image.data / "stale.tmp").write_bytes(b"root's")
    port = free_port()
    argv = [str(image.entrypoint), "--port", str(port), "--save", "3600 1"]
    env = {"PATH": f"{image.bin}:/usr/bin:/bin"}
    srv = ServerProcess(argv, port, str(image.data))
    srv.logfile = str(image.out / "server.log")
    log = open(srv.logfile, "ab")
    srv.proc = subprocess.Popen(argv, cwd=image.data, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        c = wait_until(lambda: _connect(port))
        assert c.call("SET", "k", "v") == b"+OK\r\n"
        assert c.call("SAVE") == b"+OK\r\n"
        health = subprocess.run([sys.executable, str(HEALTHCHECK), "--pid", str(srv.proc.pid)],
                                capture_output=True, text=True, timeout=30)
        assert health.returncode == 0, health.stdout
        c.close()
    finally:
        srv.stop()
    assert srv.proc.returncode == 0, srv.log()
    st = (image.data / "dump.rdb").stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (RILL_UID, RILL_GID, 0o600)


def _connect(port: int) -> RawClient | None:
    try:
        c = RawClient(port)
        if c.call("PING") == b"+PONG\r\n":
            return c
        c.close()
    except OSError:
        pass
    return None


# -- the healthcheck ---------------------------------------------------------------------


def healthcheck(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(HEALTHCHECK), *args], capture_output=True, text=True,
                          timeout=30)


def check_pid(pid: int, *extra: str) -> subprocess.CompletedProcess:
    return healthcheck("--pid", str(pid), *extra)


def test_healthcheck_follows_the_port_given_on_the_command_line():
    with start_rill() as srv:
        done = check_pid(srv.proc.pid)
        assert done.returncode == 0, done.stdout
        assert f"127.0.0.1:{srv.port} +PONG" in done.stdout
        assert srv.port != 6379
    gone = check_pid(srv.proc.pid)
    assert gone.returncode == 1 and "no such process" in gone.stdout


def test_healthcheck_follows_a_port_from_a_config_file(tmp_path):
    port = free_port()
    conf = tmp_path / "rill.conf"
    conf.write_text(f'port {port}\nsave ""\nbind 127.0.0.1\n')
    argv = [str(Path(sys.executable).with_name("rill-server")), str(conf)]
    with ServerProcess(argv, port, str(tmp_path)).start() as srv:
        done = check_pid(srv.proc.pid)
        assert done.returncode == 0, done.stdout
        assert f"127.0.0.1:{port} +PONG" in done.stdout


def test_healthcheck_follows_config_set_port():
    with start_rill() as srv:
        new = free_port()
        c = RawClient(srv.port)
        assert c.call("CONFIG", "SET", "port", str(new)) == b"+OK\r\n"
        c.close()
        done = wait_until(lambda: (d := check_pid(srv.proc.pid)).returncode == 0 and f":{new} " in d.stdout
                          and str(srv.port) not in d.stdout and d)
        assert "+PONG" in done.stdout


def test_healthcheck_counts_a_password_protected_server_as_up():
    with start_rill("--requirepass", "secret") as srv:
        done = check_pid(srv.proc.pid)
        assert done.returncode == 0, done.stdout
        assert "-NOAUTH" in done.stdout


def test_healthcheck_reaches_a_unix_socket_only_server(tmp_path):
    sock = tmp_path / "rill.sock"
    with start_rill("--unixsocket", str(sock)) as srv:
        c = RawClient(srv.port)
        assert c.call("CONFIG", "SET", "port", "0") == b"+OK\r\n"
        c.close()
        done = wait_until(lambda: (d := check_pid(srv.proc.pid)).returncode == 0 and str(sock) in d.stdout and d)
        assert done.stdout.strip().endswith(f"{sock} +PONG")


# A server that answers every connection's first request with one fixed line (or never).
FAKE_REPLIER = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], flush=True)
reply = sys.argv[1].encode()
held = []
while True:
    conn, _ = s.accept()
    held.append(conn)
    conn.recv(64)
    if reply:
        conn.sendall(reply + b"\\r\\n")
"""


@pytest.fixture
def fake_server():
    procs = []

    def start(reply: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", FAKE_REPLIER, reply], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        proc.port = int(proc.stdout.readline())  # type: ignore[attr-defined]
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("reply, healthy", [
    ("-LOADING Redis is loading the dataset in memory", True),
    ("+PONG", True),
    ("-NOAUTH Authentication required.", True),
    ("-NOPERM User default has no permissions to run the 'ping' command", True),
    ("-MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.", False),
    ("-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.", False),
    ("-ERR unknown command", False),
])
def test_healthcheck_verdict_on_each_answer(fake_server, reply, healthy):
    proc = fake_server(reply)
    done = check_pid(proc.pid)
    assert done.returncode == (0 if healthy else 1), done.stdout
    assert f"127.0.0.1:{proc.port} {reply}" in done.stdout


def test_healthcheck_fails_on_a_server_that_never_answers(fake_server):
    proc = fake_server("")
    done = check_pid(proc.pid, "--timeout", "1")
    assert done.returncode == 1
    assert f"127.0.0.1:{proc.port} timed out" in done.stdout


def test_healthcheck_fails_without_a_listener():
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        done = check_pid(idle.pid)
    finally:
        idle.kill()
        idle.wait()
    assert done.returncode == 1 and "no listening socket" in done.stdout


# Run as root in a network namespace of its own (unshare --net): loopback up, a server
# (uid 999, as rill in the image) and a decoy (another uid) that both listen, then the
# check as a third user, who cannot read the server's fds.
FOREIGN_CHECK = """
import fcntl, json, socket, struct, subprocess, sys
replier, check = sys.argv[1], sys.argv[2]
s = socket.socket()
fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", 0x1 | 0x8 | 0x40))  # SIOCSIFFLAGS lo UP
s.close()
def start(uid, reply):
    p = subprocess.Popen(["/usr/bin/python3", "-c", replier, reply], user=uid, group=uid, extra_groups=[],
                         stdout=subprocess.PIPE, text=True)
    return p, int(p.stdout.readline())
server, server_port = start(999, "-LOADING Redis is loading the dataset in memory")
decoy, decoy_port = start(4321, "+PONG")
done = subprocess.run(["/usr/bin/python3", check, "--pid", str(server.pid)], user=5555, group=5555,
                      extra_groups=[], capture_output=True, text=True)
for p in (server, decoy):
    p.kill()
print(json.dumps([done.returncode, done.stdout, done.stderr, server.pid, server_port, decoy_port]))
"""


def test_healthcheck_that_cannot_read_the_servers_fds_goes_by_the_sockets_owner(tmp_path):
    """In a container the check runs as root without CAP_SYS_PTRACE, so the fds of a server
    running as rill cannot be read: the listeners rill's uid owns are the server's."""
    need_root()
    check = Path(scratch_dir("healthcheck-")) / "rill-healthcheck"
    check.parent.chmod(0o755)
    shutil.copy(HEALTHCHECK, check)
    check.chmod(0o755)
    done = subprocess.run(["unshare", "--net", "/usr/bin/python3", "-c", FOREIGN_CHECK, FAKE_REPLIER, str(check)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    code, out, err, pid, server_port, decoy_port = json.loads(done.stdout)
    assert (code, err) == (0, ""), out
    assert out == f"pid {pid}: 127.0.0.1:{server_port} -LOADING Redis is loading the dataset in memory\n"
    assert str(decoy_port) not in out


def test_healthcheck_finds_rill_server_itself_in_a_container_like_pid_namespace(tmp_path):
    """As in a container: a PID namespace of its own, rill-server on some port, and the check
    run without --pid. Before the server runs, and after it exits, the check fails."""
    need_root()
    port = free_port()
    rill_server = Path(sys.executable).with_name("rill-server")
    check = f"{sys.executable} {HEALTHCHECK}"
    script = f"""
        {check} > before.txt; echo "before=$?" >> before.txt
        {rill_server} --port {port} --save "" > server.log 2>&1 &
        i=0
        until {check} > during.txt; do
            i=$((i + 1)); [ $i -lt 600 ] || break; sleep 0.05
        done
        echo "during=$?" >> during.txt
        kill -TERM $!; wait $!
        {check} > after.txt; echo "after=$?" >> after.txt
    """
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    before, during, after = ((tmp_path / f"{n}.txt").read_text() for n in ("before", "during", "after"))
    assert before == "no rill-server process\nbefore=1\n"
    assert re.fullmatch(rf"pid \d+: 127\.0\.0\.1:{port} \+PONG\nduring=0\n", during), during
    assert after == "no rill-server process\nafter=1\n"


def test_healthcheck_finds_only_rill_servers(tmp_path):
    """Discovery by command line: the console script (directly or through Python) and
    ``-m rill.server.main``; not a process that merely mentions rill-server."""
    sys.path.insert(0, str(DOCKER))
    try:
        import healthcheck as hc
    finally:
        sys.path.remove(str(DOCKER))
    rill_server = str(Path(sys.executable).with_name("rill-server"))
    cmdlines = {
        "1": [rill_server, "--port", "7000"],
        "2": ["/usr/local/bin/python3.11", "/usr/local/bin/rill-server"],
        "3": [sys.executable, "-m", "rill.server.main", "--port", "1"],
        "4": ["sh", "-c", "rill-server --port 7000"],
        "5": ["tail", "-f", "rill-server.log"],
        "6": [],
    }
    # process titles (set-proc-title): one string in place of the command line, NUL-padded
    titles = {"7": b"/usr/local/bin/rill-server *:6379\0\0\0\0", "8": b"redis-server *:6379\0\0"}
    proc = tmp_path / "proc"
    for pid, argv in cmdlines.items():
        (proc / pid).mkdir(parents=True)
        (proc / pid / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in argv))
    for pid, title in titles.items():
        (proc / pid).mkdir(parents=True)
        (proc / pid / "cmdline").write_bytes(title)
    (proc / "self").mkdir()
    assert hc.rill_pids(str(proc)) == [1, 2, 3, 7]


def test_readme_documents_the_image_conventions():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Docker"):]
    section = section[:section.index("\n## ", 1)]
    assert "docker run -d -p 6379:6379 rill --requirepass secret" in section
    assert "rill rill-server --port 7000" in section
    assert f"{RILL_UID}:{RILL_GID}" in section  # who must own a bind-mounted /data
    assert "-LOADING" in section


# docker run's options that take a value, to find where the image name is.
_VALUED = {"-p", "--publish", "-v", "--volume", "--name", "-e", "--env", "-u", "--user", "--network",
           "--mount", "-w", "--workdir", "--entrypoint", "--health-cmd"}


def _docker_run_args(line: str) -> list[str] | None:
    """What follows the image ``rill`` in a ``docker run`` line (None: another image)."""
    words = shlex.split(line, comments=True)[2:]
    i = 0
    while i < len(words) and words[i].startswith("-"):
        i += 1 + (words[i] in _VALUED)
    return words[i + 1:] if i < len(words) and words[i] == "rill" else None


def test_readme_docker_run_lines_start_valid_servers(image):
    """Each ``docker run ... rill ARGS`` in the README, ARGS through the entrypoint, is a
    command line rill-server accepts."""
    from rill.server.config import Config

    readme = (ROOT / "README.md").read_text()
    runs = [a for a in map(_docker_run_args, re.findall(r"(?m)^\s*(docker run .*)$", readme)) if a is not None]
    assert len(runs) >= 3
    for args in runs:
        server_args = _starts(image, *(args or ["rill-server"]))
        if args and args[0] != "rill-server" and not args[0].startswith("-"):
            continue  # another command, run as given
        cwd = os.getcwd()
        try:
            os.chdir(tempfile.gettempdir())
            Config().load_argv(server_args)
        finally:
            os.chdir(cwd)
