"""A reproduction as a redis-cli session: every step with redis-server's reply, and
where rill answers differently, both."""

from __future__ import annotations

from .generator import Op
from .resp import format_bytes
from .runner import Divergence, Pair


def transcript(pair: Pair, ops: list[Op], header: str) -> str:
    """Run ``ops`` on a fresh pair and print what each server answered."""
    pair.restart()
    pair.log = []
    try:
        div = pair.run(ops, snapshot_every=0)
    finally:
        log, pair.log = pair.log, None
    lines = [f"# {header}", f"# redis-server {redis_version(pair)} vs rill, RESP{pair.resp}"
             + (", small encodings (see runner.SMALL_ENCODINGS)" if pair.small_encodings else "")]
    for sent, mine, theirs in log:
        lines.append(f"127.0.0.1:6379> {sent}")
        if mine == theirs:
            lines.append(format_bytes(theirs))
        else:
            lines += ["# rill:", format_bytes(mine), "# redis:", format_bytes(theirs)]
    if div is not None:
        lines.append(f"# diverged: {div.what}")
        if div.signature.startswith("dataset"):
            lines.append(f"#   rill : {div.rill.decode(errors='replace')}")
            lines.append(f"#   redis: {div.redis.decode(errors='replace')}")
    else:
        lines.append("# (did not diverge on fresh servers)")
    return "\n".join(lines)


def redis_version(pair: Pair) -> str:
    info = pair.sides[1].admin.call("INFO", "server").decode()
    for line in info.split("\r\n"):
        if line.startswith("redis_version:"):
            return line.split(":")[1]
    return "?"


def report(pair: Pair, ops: list[Op], div: Divergence, shrunk: list[Op] | None, header: str) -> str:
    if shrunk is None:
        return f"# {header}\n# flaky: the prefix did not reproduce on a reset pair\n{div.describe()}"
    return transcript(pair, shrunk, header)
