"""The README's Active-Active example runs as written: its three rill-server command lines
start three regions (on free ports instead of 7001-7003), and its redis-cli session prints
what the README shows. The Compose file of the same three regions is consistent."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from tests.server.activeactive.cluster import decode, pairs
from tests.support import RawClient, ServerProcess, free_port, require_tool, scratch_dir, wait_until

ROOT = Path(__file__).resolve().parents[3]


def _section() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("\n## Active-Active\n", 1)[1].split("\n## ", 1)[0]


def _console_blocks() -> list[str]:
    return [b.split("```", 1)[0] for b in _section().split("```console\n")[1:]]


def _links_up(port: int) -> bool:
    c = RawClient(port)
    try:
        status = decode(c.call("ACTIVEACTIVE", "STATUS"))
    finally:
        c.close()
    return not isinstance(status, Exception) and all(pairs(p)["link"] == b"up" for p in status)


def test_readme_three_region_example_runs():
    servers_block, session_block = _console_blocks()[:2]
    lines = [shlex.split(line.removeprefix("$ ")) for line in servers_block.strip().splitlines()]
    assert [line[0] for line in lines] == ["rill-server"] * 3
    ports = {str(7001 + i): str(free_port()) for i in range(3)}

    def local(text: str) -> str:
        for old, new in ports.items():
            text = text.replace(old, new)
        return text

    servers = []
    try:
        for args in lines:
            args = [local(a) for a in args[1:]]
            port = int(args[args.index("--port") + 1])
            argv = [sys.executable, "-m", "rill.server.main", *args, "--save", "",
                    "--dir", scratch_dir("rill-readme-aa-")]
            servers.append(ServerProcess(argv, port, scratch_dir("rill-readme-aa-log-")).start(60))
        for srv in servers:
            wait_until(lambda srv=srv: _links_up(srv.port))
        cli = require_tool("redis-cli")
        # "$ command" lines, each followed by the output the README shows for it.
        steps: list[tuple[list[str], str]] = []
        for line in session_block.strip().splitlines():
            if line.startswith("$ "):
                steps.append((shlex.split(line[2:]), ""))
            else:
                steps[-1] = (steps[-1][0], steps[-1][1] + line + "\n")
        assert len(steps) >= 5
        for argv, shown in steps:
            assert argv[0] == "redis-cli"
            # --no-raw: the formatting redis-cli gives a terminal, not the raw one of a pipe.
            out = subprocess.run([cli, "--no-raw", *[local(a) for a in argv[1:]]],
                                 capture_output=True, text=True, timeout=30)
            assert (out.returncode, out.stdout) == (0, shown), (argv, out.stderr)
    finally:
        for srv in servers:
            srv.stop()


def test_compose_file_runs_the_same_three_regions():
    from rill.server.config import Config

    assert "docker/compose-active-active.yml" in _section()
    compose = yaml.safe_load((ROOT / "docker" / "compose-active-active.yml").read_text())
    plain = yaml.safe_load((ROOT / "docker" / "compose.yml").read_text())["services"]["rill"]
    services = compose["services"]
    assert sorted(services) == ["region1", "region2", "region3"]
    for i, (name, svc) in enumerate(sorted(services.items()), start=1):
        assert svc["build"] == plain["build"] and svc["image"] == plain["image"]
        assert svc["ports"] == [f"127.0.0.1:{7000 + i}:6379"]
        assert svc["volumes"] == [f"{name}-data:/data"]
        args = svc["command"]
        config = Config()
        config.load_argv(args)
        assert config["active-active-id"] == str(i)
        peers = args[args.index("--active-active-peers") + 1].split()
        assert peers == [f"{other}:6379" for other in sorted(services) if other != name]
    assert sorted(compose["volumes"]) == [f"{name}-data" for name in sorted(services)]
