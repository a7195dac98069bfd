"""The test suite's own rule: a test whose outside tool (the oracle, redis-check-rdb, Java,
python-lzf) is missing skips locally and fails under CI=true, so CI never passes by skipping."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import support

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("value,expected", [
    (None, False), ("", False), ("0", False), ("false", False), ("No", False),
    ("true", True), ("1", True), ("yes", True), ("TRUE", True),
])
def test_in_ci_reads_the_ci_variable(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert support.in_ci() is expected


def _without_tools(monkeypatch, tmp_path, ci: str | None) -> None:
    """PATH that holds nothing at all; CI set or not."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)


def test_a_missing_tool_skips_locally(monkeypatch, tmp_path):
    _without_tools(monkeypatch, tmp_path, None)
    with pytest.raises(pytest.skip.Exception, match="redis-check-rdb not available .*redis-tools"):
        support.require_tool("redis-check-rdb")
    with pytest.raises(pytest.skip.Exception, match="java"):
        support.require_java()
    with pytest.raises(pytest.skip.Exception, match="redis-server"):
        support.start_redis()
    assert support.optional_tool("redis-check-aof") is None


def test_a_missing_tool_fails_in_ci(monkeypatch, tmp_path):
    _without_tools(monkeypatch, tmp_path, "true")
    with pytest.raises(pytest.fail.Exception, match="redis-check-rdb is required in CI .*redis-tools"):
        support.require_tool("redis-check-rdb")
    with pytest.raises(pytest.fail.Exception, match="java is required in CI .*default-jre-headless"):
        support.require_java()
    with pytest.raises(pytest.fail.Exception, match="redis-server is required in CI"):
        support.start_redis()
    with pytest.raises(pytest.fail.Exception, match="redis-check-aof"):
        support.optional_tool("redis-check-aof")


def test_a_present_tool_is_found(monkeypatch, tmp_path):
    tool = tmp_path / "redis-check-rdb"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    _without_tools(monkeypatch, tmp_path, "true")
    assert support.require_tool("redis-check-rdb") == str(tool)
    assert support.optional_tool("redis-check-rdb") == str(tool)
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert support.require_java() == str(java)  # as PySpark picks it: JAVA_HOME first


def test_a_missing_module_skips_locally_and_fails_in_ci(monkeypatch):
    monkeypatch.setitem(sys.modules, "lzf", None)  # import lzf raises ImportError
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="Python module lzf"):
        support.require_module("lzf")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="Python module lzf is required in CI"):
        support.require_module("lzf")
    assert support.require_module("json").__name__ == "json"


def _run_pytest(tmp_path, ci: bool, *tests: str) -> subprocess.CompletedProcess:
    """Run pytest on ``tests`` with no outside tools on PATH and python-lzf hidden."""
    shadow = tmp_path / "shadow"
    shadow.mkdir(exist_ok=True)
    (shadow / "lzf.py").write_text("raise ImportError('hidden by the test')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "JAVA_HOME", "PYTEST_ADDOPTS")}
    env["PATH"] = str(tmp_path)
    env["PYTHONPATH"] = str(shadow)
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-rfEs", "-p", "no:cacheprovider", *tests],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


# Tests that once skipped silently when their tool was missing, one per way of requiring it:
# the requires marker on a test (a tool, a module), on a module, and a call in the test.
_ONCE_SKIPPING = [
    "tests/persistence/test_stream8_state.py::test_redis_check_rdb_accepts_the_extension",
    "tests/persistence/test_lzf.py::test_compress_respects_max_len",
    "tests/server/test_migrate.py::test_migrate_reconnects_to_a_restarted_target",
    "tests/server/replication/test_master.py::test_a_redis_replica_follows_rill",
]


def test_marked_tests_skip_locally_and_fail_in_ci(tmp_path):
    local = _run_pytest(tmp_path, False, *_ONCE_SKIPPING)
    assert local.returncode == 0, local.stdout + local.stderr
    assert f"{len(_ONCE_SKIPPING)} skipped" in local.stdout, local.stdout
    ci = _run_pytest(tmp_path, True, *_ONCE_SKIPPING)
    assert ci.returncode == 1, ci.stdout + ci.stderr
    assert "skipped" not in ci.stdout, ci.stdout
    for name in ("redis-check-rdb", "Python module lzf", "redis-server"):
        assert f"{name} is required in CI" in ci.stdout, ci.stdout


def test_hypothesis_is_derandomised_in_ci():
    """CI's pass or fail never depends on hypothesis's draw (conftest loads the profile)."""
    from hypothesis import settings

    ci = settings.get_profile("ci")
    assert ci.derandomize and ci.database is None
    assert not settings.get_profile("dev").derandomize
    assert not settings.get_profile("fuzz").derandomize
    expected = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if support.in_ci() else "dev")
    assert settings.default == settings.get_profile(expected)
