"""Packaging and the files around it: the distribution, Makefile, CI script, README, bench
(the Docker image has tests/test_docker.py).

These tests read the repository's files statically where running them is impossible here,
and run what can run: a wheel build, ``make -n``/``make -q`` on the Makefile's rules.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from tests.support import require_tool, start_redis, start_rill

ROOT = Path(__file__).resolve().parent.parent
# The product card's top-level folders and the import name they install under.
SOURCE_FOLDERS = ["server", "protocol", "storage", "persistence", "pipeline"]


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


# -- the distribution --------------------------------------------------------------------


def test_distribution_metadata():
    dist = metadata.distribution("rill")
    assert dist.metadata["Name"] == "rill"
    assert dist.metadata["Requires-Python"] == ">=3.11"
    requires = [r.split(";")[0] for r in dist.requires or []]
    assert any(r.startswith("uvloop") for r in requires)
    assert any(r.startswith("hiredis") for r in requires)
    extras = set(dist.metadata.get_all("Provides-Extra") or [])
    assert {"test", "bench", "lint"} <= extras
    (ep,) = [e for e in dist.entry_points if e.name == "rill-server"]
    assert (ep.group, ep.value) == ("console_scripts", "rill.server.main:main")


def test_every_source_package_is_mapped_under_rill():
    """A folder with an __init__.py that pyproject does not list would be missing from the wheel."""
    tool = _pyproject()["tool"]["setuptools"]
    mapped = {v: k for k, v in tool["package-dir"].items()}
    for top in SOURCE_FOLDERS:
        for init in (ROOT / top).rglob("__init__.py") if (ROOT / top).is_dir() else []:
            folder = init.parent.relative_to(ROOT).as_posix()
            assert folder in mapped, f"{folder}/ is not in [tool.setuptools] package-dir"
            assert mapped[folder] == "rill." + folder.replace("/", "."), folder
            assert mapped[folder] in tool["packages"], folder


def test_every_package_opens_with_a_map_of_its_modules():
    """Each package's __init__ docstring names every module and subpackage in it, so a
    newcomer finds where things live from the names (as mini-redis's "Layout" comment)."""
    import ast

    for top in SOURCE_FOLDERS:
        for init in (ROOT / top).rglob("__init__.py") if (ROOT / top).is_dir() else []:
            doc = ast.get_docstring(ast.parse(init.read_text())) or ""
            folder = init.parent
            names = [p.stem for p in folder.glob("*.py") if p.name != "__init__.py"]
            names += [p.name for p in folder.iterdir() if (p / "__init__.py").is_file()]
            missing = [n for n in names if not re.search(rf"\b{re.escape(n)}\b", doc)]
            assert not missing, f"{folder.relative_to(ROOT)}/__init__.py does not map {missing}"


def test_no_generic_top_level_module_is_installed(tmp_path):
    """Only ``rill`` is importable from site-packages; ``server`` etc. are not."""
    code = ("import importlib.util as u, json; "
            "print(json.dumps({n: u.find_spec(n) is not None for n in "
            "['rill', 'rill.server', 'rill.protocol', 'rill.storage', 'rill.persistence', "
            "'server', 'protocol', 'storage', 'persistence']}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=30, check=True)
    found = json.loads(out.stdout)
    assert all(found[n] for n in ["rill", "rill.server", "rill.protocol", "rill.storage", "rill.persistence"])
    assert not any(found[n] for n in ["server", "protocol", "storage", "persistence"])


def test_wheel_holds_every_module_and_the_command_specs(tmp_path):
    """Build the wheel the Dockerfile installs (a non-editable install) from a clean copy."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ["pyproject.toml", "README.md"]:
        shutil.copy(ROOT / name, src / name)
    for top in SOURCE_FOLDERS:
        if (ROOT / top).is_dir():
            shutil.copytree(ROOT / top, src / top, ignore=shutil.ignore_patterns("__pycache__"))
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "w"),
                          str(src)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    (wheel,) = (tmp_path / "w").glob("rill-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for top in SOURCE_FOLDERS:
        for py in (ROOT / top).rglob("*.py") if (ROOT / top).is_dir() else []:
            rel = py.relative_to(ROOT).as_posix()
            assert f"rill/{rel}" in names, f"{rel} is not in the wheel"
    assert "rill/server/commands/specs.json" in names
    for top in SOURCE_FOLDERS:
        for lua in (ROOT / top).rglob("*.lua") if (ROOT / top).is_dir() else []:
            rel = lua.relative_to(ROOT).as_posix()
            assert f"rill/{rel}" in names, f"{rel} is not in the wheel"
    assert "rill/server/lua/sandbox.lua" in names
    assert {n.split("/")[0] for n in names} == {"rill", wheel.name.split("-py3")[0] + ".dist-info"}
    entry_points = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py3')[0]}.dist-info/entry_points.txt")
    assert b"rill-server = rill.server.main:main" in entry_points


# -- Makefile ----------------------------------------------------------------------------


def _make(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    # Under `make test VENV=...` the outer make's variables reach us through MAKEFLAGS.
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "VENV", "PYTHON", "EXTRAS")}
    return subprocess.run(["make", "--no-print-directory", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, env=env)


@pytest.mark.parametrize(("target", "expected"), [
    ("run", r"rill-server --bind 127\.0\.0\.1 --port 6379"),
    ("test", r"\.venv/bin/python -m pytest"),
    ("bench", r"\.venv/bin/python -m bench"),
    ("lint", r"\.venv/bin/ruff check \.\n.*\.venv/bin/lint-imports"),
])
def test_make_targets(target, expected):
    if shutil.which("make") is None:
        pytest.fail("make is required (apt-get install make)")
    out = _make("-n", "-W", "pyproject.toml", target)
    assert out.returncode == 0, out.stderr
    # Whatever the state of the venv, the target (re)installs when pyproject.toml changed ...
    assert "pip install --quiet -e '.[test,bench,lint,lzf,spark]'" in out.stdout
    assert re.search(expected, out.stdout), out.stdout


def test_make_installs_only_when_pyproject_changes(tmp_path):
    """The stamp keyed on pyproject.toml makes set-up a no-op once done."""
    shutil.copy(ROOT / "Makefile", tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text("#!/bin/sh\nexit 0\n")
    (venv_bin / "python").chmod(0o755)
    # No stamp yet: setting up would install.
    assert _make("-q", "venv", cwd=tmp_path).returncode == 1
    assert _make("venv", cwd=tmp_path).returncode == 0  # the fake python "installs"
    assert (tmp_path / ".venv" / ".rill-installed").exists()
    assert _make("-q", "venv", cwd=tmp_path).returncode == 0  # up to date: nothing to do
    os.utime(tmp_path / "pyproject.toml", (2**31, 2**31))  # pyproject.toml changed
    assert _make("-q", "venv", cwd=tmp_path).returncode == 1
    # A missing venv is created with python3 -m venv.
    shutil.rmtree(tmp_path / ".venv")
    assert "python3 -m venv .venv" in _make("-n", "venv", cwd=tmp_path).stdout


# -- CI ----------------------------------------------------------------------------------


def test_ci_script():
    script = ROOT / ".ci" / "run"
    assert os.access(script, os.X_OK), ".ci/run must be executable"
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    install = next(ln for ln in text.splitlines() if ln.startswith("packages=("))
    # The oracle and its tools, Tcl, make; Java for PySpark; a C toolchain for python-lzf.
    assert {"redis-server", "redis-tools", "tcl", "make", "default-jre-headless", "gcc",
            "libc6-dev"} <= set(install[len("packages=("):-1].split())
    assert "apt-get update" in text and "apt-get install -y" in text
    assert text.rstrip().splitlines()[-1] == "make test"


# The Docker image: tests/test_docker.py.


# -- README ------------------------------------------------------------------------------


def _readme() -> str:
    return (ROOT / "README.md").read_text()


def test_readme_make_targets_exist():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"(?m)^([a-z][\w-]*):", makefile))
    mentioned = set(re.findall(r"\bmake ([a-z][\w-]*)", _readme()))
    assert {"run", "test"} <= mentioned
    assert mentioned <= targets, mentioned - targets


def test_readme_prerequisites_are_what_ci_installs():
    """The Quick start names what a fresh machine needs; .ci/run, which starts from a
    machine with only python3, installs exactly those packages."""
    quick = _readme().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    ci = (ROOT / ".ci" / "run").read_text()
    for package in ["python3-venv", "make", "gcc", "libc6-dev", "python3-dev", "redis-server",
                    "redis-tools", "default-jre-headless", "iproute2"]:
        assert f"`{package}`" in quick, package
        assert re.search(rf"(packages=\(|packages\+=\().*\b{re.escape(package)}\b", ci), package


def test_readme_rill_server_command_lines_parse():
    """Every ``rill-server ...`` example in the README is a command line rill accepts."""
    from rill.server.config import Config

    lines = re.findall(r"(?m)^\s*(?:\$ )?rill-server(?: (.*))?$", _readme())
    assert len(lines) >= 2
    cwd = os.getcwd()
    try:
        for line in lines:
            args = shlex.split(line or "")
            args = [tempfile.gettempdir() if a.startswith("/data") else a for a in args]
            if args and not args[0].startswith("--"):
                conf = Path(tempfile.mkdtemp()) / "redis.conf"
                conf.write_text("port 6379\n")
                args[0] = str(conf)
            Config().load_argv(args)
    finally:
        os.chdir(cwd)  # --dir changes the working directory as redis-server does


def test_readme_source_tour_names_what_exists():
    """The source tour's files exist, and each ``Class.name`` it names is defined (or set)
    in that class's module, and each bare name occurs in the sources: a move that leaves
    the tour behind fails here."""
    tour = _readme().split("## Source tour", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"`([^`]+)`", tour)
    paths = [n for n in names if "/" in n]
    assert len(paths) >= 15
    for path in paths:
        assert (ROOT / path).exists(), path
    sources = [py.read_text() for folder in SOURCE_FOLDERS for py in (ROOT / folder).rglob("*.py")]
    for name in names:
        if "/" in name or " " in name:
            continue
        qualified = re.fullmatch(r"([A-Z]\w*)\.(\w+)", name)
        if qualified:
            cls, attr = qualified.groups()
            assert any(re.search(rf"(?m)^class {cls}\b", src)
                       and re.search(rf"def {attr}\b|self\.{attr}\b", src) for src in sources), name
        else:
            assert any(re.search(rf"\b{re.escape(name.lstrip('@'))}\b", src) for src in sources), name


def test_readme_python_examples_run():
    """Each Python block of the README runs as written against a rill-server of its own."""
    blocks = re.findall(r"```python\n(.*?)```", _readme(), re.S)
    assert len(blocks) >= 3
    with start_rill() as srv:
        for code in blocks:
            out = subprocess.run([sys.executable, "-c", code.replace("6379", str(srv.port))],
                                 capture_output=True, text=True, timeout=30)
            assert out.returncode == 0, f"{code}\n{out.stderr}"
            assert out.stdout.strip(), code


def test_readme_layout_paths_exist():
    text = _readme()
    section = text[text.index("## Layout"):]
    section = section[:section.index("\n## ", 4)]
    paths = re.findall(r"(?m)^(\S+/)\s", section)
    assert len(paths) >= 6
    for p in paths:
        if p == "pipeline/":  # the Spark issue adds it
            continue
        assert (ROOT / p).is_dir(), p


def test_readme_github_actions_snippet_is_yaml():
    blocks = re.findall(r"```yaml\n(.*?)```", _readme(), re.S)
    jobs = [yaml.safe_load(b) for b in blocks]
    services = [j for j in jobs if isinstance(j, dict) and "jobs" in j]
    assert services, "no GitHub Actions workflow in the README"
    job = next(iter(services[0]["jobs"].values()))
    rill = job["services"]["rill"]
    assert rill["ports"] == ["6379:6379"]


# -- the benchmark harness (no timings asserted) -----------------------------------------


def test_bench_python_env_caches_bytecode(monkeypatch):
    """rill under the bench writes its bytecode whether or not the caller names its own
    cache directory, and a caller's directory is kept."""
    from bench.harness import python_env
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    env = python_env()
    assert "PYTHONDONTWRITEBYTECODE" not in env and env["PYTHONPYCACHEPREFIX"]
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "/tmp/callers-own-pyc")
    env = python_env()
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPYCACHEPREFIX"] == "/tmp/callers-own-pyc"


def test_bench_csv_parsing():
    from bench.harness import parse_csv

    out = ('"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",'
           '"p99_latency_ms","max_latency_ms"\n'
           '"LPUSH (needed to benchmark LRANGE)","63492.06","0.416","0.080","0.383","0.607","0.687","1.551"\n'
           '"LRANGE_100 (first 100 elements)","48076.92","0.560","0.216","0.503","0.823","0.975","1.575"\n')
    assert parse_csv(out) == {"LPUSH (needed to benchmark LRANGE)": 63492.06,
                              "LRANGE_100 (first 100 elements)": 48076.92}


def test_bench_registry_covers_the_issues():
    from bench.workloads import WORKLOADS

    names = {w.name for w in WORKLOADS}
    for required in ["PING_MBULK", "SET -P16", "GET", "INCR", "MSET -P16", "XADD", "XADD -P16",
                     "XRANGE COUNT 10", "XRANGE COUNT 100", "XREAD COUNT 100", "XLEN",
                     "XREADGROUP COUNT 10 + XACK", "LPUSH", "RPUSH", "LPOP", "RPOP", "LRANGE_100"]:
        assert required in names
    targets = {r.label: str(r.target) for w in WORKLOADS for r in w.rows}
    # Issue 24's table, row by row: its targets replaced issues 2-6's for these rows.
    unpipelined = ["PING_MBULK", "SET", "GET", "INCR", "MSET", "XADD", "XRANGE COUNT 10", "XLEN",
                   "LPUSH", "RPUSH", "LPOP", "RPOP", "HSET", "SADD", "ZADD", "ZPOPMIN"]
    assert {targets[r] for r in unpipelined} == {">=1.00x"}
    assert {targets[f"{r} -P16"] for r in ["PING_MBULK", "SET", "GET", "INCR", "MSET"]} == {">=0.85x"}
    assert targets["XADD -P16"] == ">=0.75x"
    large = ["LRANGE_100", "XRANGE COUNT 100", "XREAD COUNT 100", "ZRANGE 0 99 WITHSCORES"]
    assert {targets[r] for r in large} == {">=1.00x"}
    assert targets["XREADGROUP COUNT 10 + XACK"] == ">=0.80x"
    assert targets["stream memory/entry (two small fields)"] == "<=1.00x"
    assert targets["SET at maxmemory (allkeys-lru)"] == ">=0.70x"
    assert targets["BLPOP wake p99 (1000 blocked)"] == "<=10"


def test_bench_skips_what_rill_does_not_serve(tmp_path):
    """A workload whose command rill lacks is skipped with a note, and the run goes on."""
    from bench.harness import (
        Ctx,
        Row,
        Server,
        Workload,
        redis_argv,
        render_table,
        rill_argv,
        run_workload,
    )

    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is required (apt-get install redis-server)")

    def measure(ctx, server):
        with server.client() as c:
            return {"echo": float(len(c.call("ECHO", "abc")))}

    missing = Workload("nope", "test", 0, [Row("nope")], measure, probe=[["NO-SUCH-COMMAND", "x"]])
    present = Workload("echo", "test", 0, [Row("echo", "B/entry")], measure, probe=[["ECHO", "x"]])
    redis = Server("redis-server", redis_argv, is_redis=True).start()
    rill = Server("rill", rill_argv).start()
    try:
        (skipped,) = run_workload(Ctx(quick=True), missing, redis, rill)
        (ran,) = run_workload(Ctx(quick=True), present, redis, rill)
    finally:
        redis.stop()
        rill.stop()
    assert skipped.status == "skipped" and skipped.note == "not implemented in rill yet (NO-SUCH-COMMAND)"
    assert (ran.redis, ran.rill, ran.ratio) == (3.0, 3.0, 1.0)
    table = render_table([skipped, ran])
    assert "skipped: not implemented in rill yet (NO-SUCH-COMMAND)" in table
    assert "1.00x" in table


def test_readme_redis_cli_lines_run():
    """Each one-shot ``redis-cli`` line of the README runs against rill and prints what it
    prints against redis-server (HELLO's connection id aside)."""
    cli = require_tool("redis-cli")
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", _readme(), re.S):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("redis-cli ") and len(shlex.split(line)) > 3:
                lines.append(shlex.split(line)[1:])
    assert len(lines) >= 3
    with start_rill() as mine, start_redis() as oracle:
        outputs = []
        for server in (mine, oracle):
            printed = []
            for args in lines:
                args = [str(server.port) if a == "6379" else a for a in args]
                out = subprocess.run([cli, *args], capture_output=True, text=True, timeout=30)
                assert out.returncode == 0 and "ERR" not in out.stdout, (args, out.stdout, out.stderr)
                printed.append(re.sub(r"(?m)^id \d+$", "id ?", out.stdout))  # HELLO's connection id
            outputs.append(printed)
        assert outputs[0] == outputs[1]


def test_readme_lists_what_the_fuzzer_allows_from_newer_redis():
    """The README's one list of behaviour from Redis versions newer than 7.0 names every
    item the fuzzer allows, each with its version."""
    from tests.fuzz.exceptions import NEWER_REDIS

    text = _readme()
    section = text[text.index("- Newer than Redis 7.0"):]
    section = section[:section.index("\n- ", 3)]
    for what, version, _ in NEWER_REDIS:
        command = re.search(r"[A-Z][A-Z/]+", what).group()  # the first command it names
        line = next((ln for ln in section.split("\n  - ") if ln.startswith(f"{version}:")
                     and command in ln), None)
        assert line is not None, (version, what)
