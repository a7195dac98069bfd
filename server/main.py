"""``rill-server``: the command line, logging, listeners, the cron, and shutdown."""

from __future__ import annotations

import asyncio
import atexit
import logging
import logging.handlers
import os
import signal
import socket
import sys
import threading
import time
from typing import Any, NoReturn

from rill.protocol.reply import ReplyError

from . import REDIS_VERSION, __version__
from .commands import load_all
from .commands.table import TABLE
from .config import Config, ConfigError, ConfigLineError
from .connection import Connection
from .disk import LoadAborted
from .process import (
    OOM_BGCHILD,
    OOM_MASTER,
    OOM_REPLICA,
    OomScoreAdj,
    Supervisor,
    at_fork_child,
    daemonize,
    disable_thp,
    hot_core,
    set_cpu_affinity,
    write_pidfile,
)
from .proctitle import ProcTitle, argv0
from .server import Server
from .shutdown import check as shutdown_check
from .tls import RECONFIGURE_ERROR as TLS_RECONFIGURE_ERROR
from .tls import TLSConfigError, serve_tls, tls_wanted

try:
    import uvloop
except ImportError:  # pragma: no cover  (a dependency except on Windows)
    uvloop = None

log = logging.getLogger("rill")


class RedisLogFormatter(logging.Formatter):
    """Redis's log line: ``pid:M 20 Nov 2026 23:07:21.123 * message``."""

    _LEVEL_CHARS = {logging.DEBUG: ".", logging.INFO: "-", logging.WARNING: "#", logging.ERROR: "#"}

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, "raw", False):  # the logo: written as it is, as Redis's LL_RAW
            return record.getMessage()
        t = time.localtime(record.created)
        ms = int(record.msecs)
        stamp = time.strftime("%d %b %Y %H:%M:%S", t) + f".{ms:03d}"
        level = "*" if record.levelno == 25 else self._LEVEL_CHARS.get(record.levelno, "*")
        return f"{os.getpid()}:M {stamp} {level} {record.getMessage()}"


NOTICE = 25
logging.addLevelName(NOTICE, "NOTICE")
_LEVELS = {"debug": logging.DEBUG, "verbose": logging.INFO, "notice": NOTICE, "warning": logging.WARNING}


class RedisSyslogHandler(logging.handlers.SysLogHandler):
    """syslog-enabled: each message also goes to syslog as ``ident[pid]: message`` at
    the facility syslog-facility names, and the priority of its level (notice included).
    A syslog that is not there (or goes away) loses the messages silently, as syslog(3)."""

    def __init__(self, ident: str, facility: str, address: str = "/dev/log") -> None:
        self.syslog_ident = ident
        super().__init__(address, facility=self.facility_names[facility])
        self.priority_map = {**self.priority_map, "NOTICE": "notice"}

    def format(self, record: logging.LogRecord) -> str:
        # The pid when the message is sent: daemonize forks after logging is set up.
        return f"{self.syslog_ident}[{os.getpid()}]: {record.getMessage()}"

    def createSocket(self) -> None:  # noqa: N802 (the stdlib's name)
        try:
            super().createSocket()
        except OSError:
            self.socket = None  # tried again at the next message

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802
        pass


def setup_logging(config: Config, syslog_address: str = "/dev/log") -> None:
    logfile = config["logfile"]
    handler: logging.Handler
    handler = logging.FileHandler(logfile) if logfile else logging.StreamHandler(sys.stdout)
    handler.setFormatter(RedisLogFormatter())
    log.handlers[:] = [handler]
    if config.bool("syslog-enabled"):
        log.handlers.append(RedisSyslogHandler(config["syslog-ident"], config["syslog-facility"], syslog_address))
    log.setLevel(_LEVELS.get(config["loglevel"], NOTICE))
    log.propagate = False


def notice(msg: str, *args: object) -> None:
    log.log(NOTICE, msg, *args)


# rill's own start-up banner (a rill: a small stream). What it tells is what Redis's
# logo tells; Redis's test suite waits for its " PID: <pid>" to know a server it
# spawned is up.
LOGO = """
       ~~~~~~~~
    ~~~~~~~~~~~~~~~~       rill %(version)s (Redis %(redis_version)s compatible) 64 bit
  ~~~~~~~    ~~~~~~~~~
 ~~~~~~  ~~~~~~  ~~~~~~    Running in %(mode)s mode
  ~~~~~~~~~    ~~~~~~~     Port: %(port)d
    ~~~~~~~~~~~~~~~~       PID: %(pid)d
       ~~~~~~~~
"""


def announce_mode(config: Config, port: int) -> None:
    """The logo, or the one line that stands for it, as Redis decides: the logo when
    always-show-logo is set, or when the log is a terminal (stdout, no syslog)."""
    tty = not config["logfile"] and not config.bool("syslog-enabled") and sys.stdout.isatty()
    if config.bool("always-show-logo") or tty:
        log.log(NOTICE, "%s", LOGO % {"version": __version__, "redis_version": REDIS_VERSION,
                                      "mode": "standalone", "port": port, "pid": os.getpid()},
                extra={"raw": True})
    else:
        notice("Running mode=standalone, port=%d.", port)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``rill-server`` console script."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-v", "--version"):
        print(f"rill server v={__version__} redis_version={REDIS_VERSION} bits=64")
        return
    if args and args[0] in ("-h", "--help"):
        print("Usage: rill-server [/path/to/redis.conf] [options]\n"
              "Examples:\n       rill-server --port 7777\n       rill-server /etc/redis/6379.conf --loglevel verbose")
        return
    config = Config()
    try:
        config.load_argv(args)
        load_all()
        TABLE.renamed(config.renames, ConfigLineError)  # a bad rename-command fails here, before any log
    except (ConfigError, OSError) as e:
        sys.stderr.write(f"\n*** FATAL CONFIG FILE ERROR (rill {__version__}) ***\n{e}\n")
        sys.exit(1)
    setup_logging(config)
    if config.bool("disable-thp"):
        disable_thp()
    # As Redis: a supervised server stays in the foreground whatever daemonize says,
    # and the fork happens before the event loop (or any thread) exists.
    supervisor = Supervisor.detect(config["supervised"])
    if config.bool("daemonize") and not supervisor.supervised:
        daemonize()
    loop = uvloop.new_event_loop() if uvloop is not None else asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        code = loop.run_until_complete(serve(config, supervisor))
    finally:
        loop.close()
    _exit(code)


def _exit(code: int) -> NoReturn:
    """End the process once serving is over, as Redis's exit() does: other non-daemon
    threads finish, the atexit duties run (logging's final flush) and the standard
    streams are flushed, but the interpreter does not then tear down every module and
    object one by one. Everything that holds data (the AOF, the final save, the
    listeners) was closed by serve()'s shutdown. That teardown was about a third of the
    CPU time of a server started, pinged and shut down (76e6 of 674e6 user instructions,
    at ~0.1 instructions a cycle; 613-697 ms of task-clock against 383-520 ms without it,
    on the loaded 2-core test machine), paid by every server the test suite starts."""
    main_thread = threading.main_thread()
    for thread in threading.enumerate():
        if thread is not main_thread and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # closed, or None without a console
            pass
    os._exit(code)


async def serve(config: Config, supervisor: Supervisor | None = None) -> int:
    """Run a server until SHUTDOWN or a signal; the process exit code."""
    load_all()
    notice("oO0OoO0OoO0Oo rill is starting oO0OoO0OoO0Oo")
    notice("rill version=%s, redis_version=%s, bits=64, pid=%d, just started",
           __version__, REDIS_VERSION, os.getpid())
    mode, compiled, problems = hot_core()
    notice("Hot core: %s%s", mode, f" ({', '.join(compiled)})" if compiled else "")
    for problem in problems:
        log.warning("Warning: %s", problem)
    if config.config_file:
        notice("Configuration loaded")
    else:
        log.warning("Warning: no config file specified, using the default config. "
                    "In order to specify a config file use rill-server /path/to/redis.conf")
    loop = asyncio.get_running_loop()
    server = Server(config)
    server.acl.load_at_startup()  # the config's users (or aclfile); exits on an error, as Redis
    server.replica_side.follow_configured()
    server.loop = loop
    server.shutdown_event = asyncio.Event()
    # Before any listener exists: a client can be served as soon as the first
    # one does, and a SIGTERM from then on must shut down cleanly.
    # A plain handler, not the loop's: a second SIGINT must act even while a foreground
    # save holds the loop (Redis exits from its handler then).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda sig, _frame: _on_signal(server, sig))
    server.executable = os.path.abspath(sys.argv[0])
    server.tcp_port = config.int("port")
    if tls_wanted(config):
        try:
            server.tls.configure()  # logs Redis's reason when it cannot
        except TLSConfigError:
            log.warning("Failed to configure TLS. Check logs for more info.")
            return 1
    server.tls.install(server)
    # The process title shows where rill listens: set once the listeners are up, and
    # again as CONFIG SET moves them or changes the template, as Redis does.
    title = server.proc_title = ProcTitle(lambda: config.values, config.config_file, argv0(),
                                          config.bool("set-proc-title"))
    config.appliers["proc-title-template"] = lambda _template: title.update()
    listeners = []
    tcp: list = []  # the TCP listeners, which CONFIG SET port replaces
    port = config.int("port")
    if port:
        try:
            socks = _bind_tcp(config, port)
        except OSError as e:
            log.warning("Warning: Could not create server TCP listening socket %s", e)
            socks = []
        if not socks and config["bind"].split():  # bind "": no TCP listener, as Redis
            # Redis's words: Redis's test harness looks for them to retry on another port.
            log.warning("Failed listening on port %d (TCP), aborting.", port)
            return 1
        tcp = [await _serve(loop, server, sock) for sock in socks]
        listeners.extend(tcp)
        if socks:
            server.tcp_port = socks[0].getsockname()[1]

    def rebind(group: list, new_port: int, tls: bool, error: str) -> None:
        """Move one group of listeners (plain or TLS) to ``new_port`` (0: none), binding
        first so that a busy port is refused with ``error`` and nothing changes."""
        try:
            socks = _bind_tcp(config, new_port) if new_port else []
        except OSError as e:
            raise ConfigError(error) from e
        swap(group, socks, tls)

    def swap(group: list, socks: list, tls: bool) -> None:
        """Replace one group's listeners by servers on the bound ``socks``."""
        old = list(group)
        group.clear()
        for old_srv in old:
            old_srv.close()
            listeners.remove(old_srv)

        async def start() -> None:
            for sock in socks:
                srv = await _serve(loop, server, sock, tls=tls)
                group.append(srv)
                listeners.append(srv)

        loop.create_task(start())

    def change_port(new: str) -> None:
        """CONFIG SET port: listen on the new port, then stop listening on the old one."""
        new_port = int(new)
        if new_port == server.tcp_port:
            return
        rebind(tcp, new_port, False, "Unable to listen on this port")
        server.tcp_port = new_port
        title.update()

    config.appliers["port"] = change_port
    tls: list = []  # the TLS listeners, which CONFIG SET tls-port replaces
    tls_port = config.int("tls-port")
    if tls_port:
        try:
            socks = _bind_tcp(config, tls_port)
        except OSError as e:
            log.warning("Warning: Could not create server TCP listening socket %s", e)
            socks = []
        if not socks and config["bind"].split():
            log.warning("Failed listening on port %d (TLS), aborting.", tls_port)
            return 1
        tls = [await _serve(loop, server, sock, tls=True) for sock in socks]
        listeners.extend(tls)
        server.tls_port = socks[0].getsockname()[1] if socks else tls_port

    def change_tls_port(new: str) -> None:
        """CONFIG SET tls-port: configure TLS if it was not, then move the TLS listener
        as CONFIG SET port moves the plain one."""
        new_port = int(new)
        if not server.tls.configured:
            try:
                server.tls.configure()
            except TLSConfigError:
                raise ConfigError(TLS_RECONFIGURE_ERROR) from None
        if new_port == server.tls_port:
            return
        rebind(tls, new_port, True, "Unable to listen on this port. Check server logs.")
        server.tls_port = new_port
        title.update()

    config.appliers["tls-port"] = change_tls_port

    bound_to = [config["bind"]]  # the addresses the listeners are on now

    def listen_on(bind: str) -> None:
        """The TCP and TLS listeners, on every address of ``bind`` (none for "")."""
        bound: list[list[socket.socket]] = []
        try:
            for group_port in (server.tcp_port, server.tls_port):
                bound.append(_bind_tcp(config, group_port, bind) if group_port else [])
        except OSError:
            for socks in bound:
                for sock in socks:
                    sock.close()
            raise
        swap(tcp, bound[0], False)
        swap(tls, bound[1], True)
        bound_to[0] = bind
        title.update()

    def change_bind(new: str) -> None:
        """CONFIG SET bind (Redis's changeBindAddr): the old listeners close, the new
        ones open; if any address cannot be bound, the old addresses are bound again."""
        for group in (tcp, tls):
            swap(group, [], False)  # closes the listening sockets now, freeing their ports
        try:
            listen_on(new)
        except OSError as e:
            log.warning("Warning: Could not create server TCP listening socket %s", e)
            log.warning("Failed to bind")
            try:
                listen_on(bound_to[0])
            except OSError as again:
                log.warning("Warning: Could not create server TCP listening socket %s", again)
            raise ConfigError("Failed to bind to specified addresses.") from None

    config.appliers["bind"] = change_bind
    unixsocket = config["unixsocket"]
    if unixsocket:
        try:
            os.unlink(unixsocket)
        except FileNotFoundError:
            pass
        srv = await loop.create_unix_server(lambda: Connection(server, unix=True), unixsocket,
                                             backlog=config.int("tcp-backlog"))
        os.chmod(unixsocket, int(config["unixsocketperm"], 8) or 0o700)
        listeners.append(srv)
    if not port and not tls_port and not unixsocket:
        log.warning("Configured to not listen anywhere, exiting.")
        return 1
    # Redis writes a pidfile when daemonized (to /var/run/redis.pid if none is named)
    # or when one is named.
    pidfile = config["pidfile"] or ("/var/run/redis.pid" if config.bool("daemonize")
                                    and not (supervisor and supervisor.supervised) else "")
    if pidfile:
        write_pidfile(pidfile)
    title.update()
    _setup_oom_score_adj(server, config)
    announce_mode(config, server.tcp_port or server.tls_port)
    notice("Server initialized")
    for hook in server.startup_hooks:
        hook()
    server.supervised_mode = supervisor.mode if supervisor is not None else "no"
    if server.startup_load is not None:
        await load_while_serving(server, server.startup_load())
    cron = None
    if not server.shutdown_event.is_set():  # else a shutdown came while loading
        server.cron_hooks.append(lambda: server.shutdown_asap and start_signalled_shutdown(server))
        server.cron_hooks.append(lambda: shutdown_check(server))  # shutdown-timeout's wait
        set_cpu_affinity(config["server_cpulist"])  # last, as Redis: earlier threads keep theirs
        cron = loop.create_task(_cron(server))
        if port:
            notice("Ready to accept connections tcp")
        if tls_port:
            notice("Ready to accept connections tls")
        if unixsocket:
            notice("Ready to accept connections unix")
        if supervisor is not None:
            supervisor.ready(replica=server.replica_of is not None)
            server.notify_systemd = supervisor.systemd  # STOPPING=1 when a shutdown begins
        await server.shutdown_event.wait()
    if cron is not None:
        cron.cancel()
    code = 0
    for hook in server.shutdown_hooks:
        try:
            hook()
        except Exception as e:  # a failing duty must not hide the exit
            log.warning("Error during shutdown: %s", e)
            code = 1
    for srv in listeners:
        srv.close()
    if unixsocket:
        try:
            os.unlink(unixsocket)
        except OSError:
            pass
    if pidfile:
        try:
            os.unlink(pidfile)
        except OSError:
            pass
    notice("rill is now ready to exit, bye bye...")
    return code


def _setup_oom_score_adj(server: Any, config: Config) -> None:
    """oom-score-adj: the master's or replica's score now and whenever the role changes
    (at once, as REPLICAOF changes it, as Redis does), the child's in every BGSAVE/BGREWRITEAOF child, and CONFIG
    SET of either parameter applied at once (refused, and rolled back, if it cannot be)."""
    oom = OomScoreAdj()
    state = {"class": -1}

    def role_class() -> int:
        return OOM_REPLICA if server.replica_of is not None else OOM_MASTER

    def apply(mode: str, values: str, process_class: int) -> None:
        try:
            oom.apply(mode, values, process_class)
        except (OSError, ValueError) as e:
            log.warning("Unable to write oom_score_adj: %s", getattr(e, "strerror", None) or e)
            raise ConfigError("Failed to set current oom_score_adj. Check server logs.") from None
        state["class"] = process_class

    def on_role() -> None:
        if config["oom-score-adj"] != "no" and state["class"] != role_class():
            try:
                apply(config["oom-score-adj"], config["oom-score-adj-values"], role_class())
            except ConfigError:
                state["class"] = role_class()  # warned; the next role change tries again

    def in_child() -> None:
        if config["oom-score-adj"] != "no":
            try:
                oom.apply(config["oom-score-adj"], config["oom-score-adj-values"], OOM_BGCHILD)
            except (OSError, ValueError):
                pass

    config.appliers["oom-score-adj"] = lambda v: apply(v, config["oom-score-adj-values"], role_class())
    config.appliers["oom-score-adj-values"] = lambda v: apply(config["oom-score-adj"], v, role_class())
    server.role_hooks.append(on_role)
    at_fork_child(in_child)
    if config["oom-score-adj"] != "no":
        try:
            apply(config["oom-score-adj"], config["oom-score-adj-values"], role_class())
        except ConfigError:
            pass  # warned; Redis starts anyway


def _bind_tcp(config: Config, port: int, bind: str | None = None) -> list[socket.socket]:
    """Bound, listening sockets for every ``bind`` address (the config's unless given)
    on ``port`` (Redis's listenToPort); none for an empty ``bind``.

    An address marked optional (``-::*``) that cannot be bound is skipped; any other
    failure closes what was bound and raises OSError naming the address.
    """
    socks: list[socket.socket] = []
    try:
        for addr in (config["bind"] if bind is None else bind).split():
            optional = addr.startswith("-")
            host = addr.lstrip("-")
            if host in ("*", "0.0.0.0"):
                host, family = "0.0.0.0", socket.AF_INET
            elif host in ("::*", "::"):
                host, family = "::", socket.AF_INET6
            else:
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((host, port))
                sock.listen(config.int("tcp-backlog"))
            except OSError as e:
                sock.close()
                if optional or (family == socket.AF_INET6 and e.errno in (97, 99)):
                    continue
                raise OSError(e.errno, f"{host}:{port}: {e.strerror}") from None
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            socks.append(sock)
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


async def _serve(loop: asyncio.AbstractEventLoop, server: Any, sock: socket.socket,
                 tls: bool = False) -> asyncio.AbstractServer:
    """Serve a bound socket: plain connections, or TLS ones that each begin with a handshake."""
    if tls:
        return await serve_tls(server, sock)
    # create_server calls listen() again, with its own backlog unless told tcp-backlog.
    return await loop.create_server(lambda: Connection(server), sock=sock,
                                    backlog=server.config.int("tcp-backlog"))


async def load_while_serving(server: Server, steps: Any) -> None:
    """Drive the start-up load's steps (server/disk.py's LoadSteps) with the listeners
    open, as Redis serves clients while it loads: parsing runs in a worker thread while
    the loop answers (-LOADING to most commands), the AOF's commands run on the loop
    with a pause every so many. A shutdown requested meanwhile stops the load between
    two steps (or the parse at its next progress report)."""
    loop = asyncio.get_running_loop()
    value: Any = None
    error: Exception | None = None
    try:
        while True:
            try:
                step = steps.throw(error) if error is not None else steps.send(value)
            except StopIteration:
                return
            value = error = None
            if server.shutdown_event.is_set():
                steps.close()
                return
            if step is None:
                await asyncio.sleep(0)
                continue
            try:
                value = await loop.run_in_executor(None, step)
            except Exception as e:  # noqa: BLE001 - handed back to the loader, which decides
                error = e
    except LoadAborted:
        return


def _on_signal(server, sig: int) -> None:
    """SIGTERM/SIGINT, as Redis's handler: only note the request (the cron starts the
    shutdown, so SHUTDOWN ABORT can cancel it first); a SIGINT while one is pending
    means "now": remove this process's temp RDB and exit at once, unclean."""
    if server.shutdown_asap and sig == signal.SIGINT:
        log.warning("You insist... exiting now.")
        try:
            os.unlink(os.path.join(server.config["dir"], f"temp-{os.getpid()}.rdb"))
        except OSError:
            pass
        os._exit(1)
    if server.loading:
        log.warning("Received shutdown signal during loading, scheduling shutdown.")
    else:
        log.warning("Received %s scheduling shutdown...", "SIGINT" if sig == signal.SIGINT else "SIGTERM")
    server.shutdown_asap = sig
    if server.loading:
        # No cron runs while loading: the loop stops the load now (nothing is saved).
        server.loop.call_soon_threadsafe(start_signalled_shutdown, server)


def start_signalled_shutdown(server) -> None:
    """The cron's part of a signal (and the loader's): the shutdown it asked for, with
    shutdown-on-sigterm / shutdown-on-sigint's flags as SHUTDOWN takes them. The request
    stays noted until the shutdown fails or is aborted, so a SIGINT during the final
    save still means "now"."""
    sig = server.shutdown_asap
    if not sig or server.pending_shutdown is not None or server.shutdown_event.is_set():
        return  # aborted meanwhile, or already under way
    flags = server.config["shutdown-on-sigint" if sig == signal.SIGINT else "shutdown-on-sigterm"].split()
    save = True if "save" in flags else False if "nosave" in flags else None
    try:
        server.shutdown(save, force="force" in flags, now="now" in flags)
    except ReplyError:
        server.shutdown_asap = 0  # the final save failed and is logged; Redis keeps serving, and so does rill


def effective_hz(configured: int, dynamic: bool, clients: int) -> int:
    """The cron's rate: ``hz`` within [1, 500], doubled while there are more than 200
    clients per tick when ``dynamic-hz`` is on (up to 500), as Redis's serverCron."""
    hz = max(1, min(500, configured))
    if dynamic:
        while clients // hz > 200:
            hz *= 2
            if hz > 500:
                return 500
    return hz


async def _cron(server) -> None:
    while True:
        config = server.config
        server.hz = hz = effective_hz(config.int("hz"), config.bool("dynamic-hz"), len(server.clients))
        await asyncio.sleep(1 / hz)
        try:
            server.cron()
        except Exception:  # the cron must survive a bug in one of its duties
            log.exception("cron failure")


if __name__ == "__main__":
    main()
