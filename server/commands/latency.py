"""LATENCY: the latency monitor's events (LATEST, HISTORY, GRAPH, DOCTOR, RESET)
and the per-command latency histograms (HISTOGRAM). The data and its rendering
live in rill.server.latency; these are the replies Redis 7.0 gives."""

from __future__ import annotations

from rill.protocol.reply import Map, Raw, ReplyError, Verbatim, encode

from ..client import Client
from ..commandstats import CommandStats
from ..latency import cumulative_usec, doctor, graph, hdr_counts
from .args import help_reply
from .table import command


def _event(argv: list[bytes]) -> str:
    return argv[2].decode(errors="surrogateescape")


@command("latency|latest")
def latency_latest(c: Client, argv: list[bytes]):
    out = []
    for event, series in c.server.latency.events.items():
        when, ms = series.latest()
        out.append([event.encode(), when, ms, series.max])
    return out


@command("latency|history")
def latency_history(c: Client, argv: list[bytes]):
    series = c.server.latency.events.get(_event(argv))
    if series is None:
        return []
    return [[when, ms] for when, ms in series.samples()]


@command("latency|reset")
def latency_reset(c: Client, argv: list[bytes]):
    return c.server.latency.reset(argv[2:] if len(argv) > 2 else None)


@command("latency|graph")
def latency_graph(c: Client, argv: list[bytes]):
    event = _event(argv)
    series = c.server.latency.events.get(event)
    if series is None:
        raise ReplyError(b"ERR No samples available for event '%s'" % argv[2])
    return Verbatim(graph(event, series).encode())


@command("latency|doctor")
def latency_doctor(c: Client, argv: list[bytes]):
    s = c.server
    config = s.config
    report = doctor(
        s.latency,
        threshold_ms=s.latency_threshold_ms,
        slowlog_us=config.int("slowlog-log-slower-than"),
        fork_rate=s.fork_rate,
        appendfsync=config["appendfsync"],
        hz=config.int("hz"),
    )
    return Verbatim(report.encode())


def _histogram(st: CommandStats) -> Map:
    counts = hdr_counts(st)
    return Map([
        (b"calls", sum(n for _, n in counts)),
        (b"histogram_usec", Map(cumulative_usec(counts))),
    ])


@command("latency|histogram")
def latency_histogram(c: Client, argv: list[bytes]):
    table = c.server.table
    pairs: list[tuple[bytes, Map]] = []
    if len(argv) == 2:
        wanted = table.all()
    else:
        wanted = []
        for name in argv[2:]:
            cmd = table.lookup_name(name)
            if cmd is not None:  # unknown names are skipped, as Redis does
                wanted.append(cmd)
                wanted.extend(cmd.subcommands.values())
    for cmd in wanted:
        st = c.server.cmdstats.get(cmd)
        if st is not None and st.samples():
            pairs.append((cmd.fullname.encode(), _histogram(st)))
    # Written out here rather than as a Map: asked twice, a command is listed twice.
    head = b"%%%d\r\n" % len(pairs) if c.resp3 else b"*%d\r\n" % (2 * len(pairs))
    return Raw(head + b"".join(encode(name, c.resp3) + encode(h, c.resp3) for name, h in pairs))


@command("latency|help")
def latency_help(c: Client, argv: list[bytes]):
    return help_reply([
        "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Return a human readable latency analysis report.",
        "GRAPH <event>",
        "    Return an ASCII latency graph for the <event> class.",
        "HISTORY <event>",
        "    Return time-latency samples for the <event> class.",
        "LATEST",
        "    Return the latest latency samples for all events.",
        "RESET [<event> ...]",
        "    Reset latency data of one or more <event> classes.",
        "    (default: reset all data for all event classes)",
        "HISTOGRAM [COMMAND ...]",
        "    Return a cumulative distribution of latencies in the format of a histogram for the "
        "specified command names.",
        "    If no commands are specified then all histograms are replied.",
    ])
