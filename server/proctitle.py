"""The process title: ``set-proc-title`` and ``proc-title-template``, as Redis 7.0 has them.

Redis rewrites the memory that holds its command line, so that ``ps`` and
``/proc/PID/cmdline`` show e.g. ``redis-server 127.0.0.1:6379``: the template
``{title} {listen-addr} {server-mode}`` expanded, then trimmed of spaces. rill does the
same from Python: /proc/self/stat says where the kernel keeps argv (arg_start..arg_end)
and the environment strings after it (env_start..env_end); the environment is copied
elsewhere (libc's clearenv and setenv, as Redis's own setproctitle does) so that both
areas together hold the title, written in place.

{title} is the path the server was started by (its argv[0], as Redis's exec_argv[0]);
a background child names itself instead (``redis-rdb-bgsave``...), as Redis's children do.

No config import here: config.py validates templates with ``expand``.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from collections.abc import Callable, Mapping

log = logging.getLogger("rill")

INVALID_TEMPLATE = "template format is invalid or contains unknown variables"
MAX_TITLE = 255  # bytes, as Redis's setproctitle keeps at most


def expand(template: str, lookup: Callable[[str], str | None]) -> str | None:
    """The template with each ``{name}`` replaced by ``lookup(name)``, and ``{{`` by a
    brace; None when a name is unknown (lookup gives None) or a brace is left open.
    Text outside braces, a lone ``}`` included, is kept as it is."""
    out: list[str] = []
    pos = 0
    while pos < len(template):
        brace = template.find("{", pos)
        if brace < 0:
            out.append(template[pos:])
            break
        out.append(template[pos:brace])
        if brace + 1 == len(template):
            return None  # ends inside a variable
        if template[brace + 1] == "{":
            out.append("{")
            pos = brace + 2
            continue
        close = template.find("}", brace + 1)
        if close < 0:
            return None
        value = lookup(template[brace + 1:close])
        if value is None:
            return None
        out.append(value)
        pos = close + 1
    return "".join(out).strip(" ")


def variables(values: Mapping[str, str], config_file: str | None, title: str) -> Callable[[str], str | None]:
    """The lookup of Redis's template variables from the parameter values (as CONFIG GET
    shows them): ``listen-addr`` is the first bind address (``*`` with none) and the
    TCP port, else the TLS port, else the unix socket; ``server-mode`` is empty, as rill
    is neither a cluster node nor a sentinel."""
    port, tls_port = int(values["port"]), int(values["tls-port"])

    def lookup(name: str) -> str | None:
        if name == "title":
            return title
        if name == "listen-addr":
            if port or tls_port:
                addrs = values["bind"].split()
                return f"{addrs[0] if addrs else '*'}:{port or tls_port}"
            return f"unixsocket:{values['unixsocket']}"
        if name == "server-mode":
            return ""
        if name == "config-file":
            return config_file or "-"
        if name == "port":
            return str(port)
        if name == "tls-port":
            return str(tls_port)
        if name == "unixsocket":
            return values["unixsocket"]
        return None

    return lookup


def valid(template: str, values: Mapping[str, str], config_file: str | None) -> bool:
    """Redis's check: the template expands, with an empty {title} and the values now,
    to something that is not empty (so ``{title}`` alone, or ``{unixsocket}`` without
    one, is refused)."""
    return bool(expand(template, variables(values, config_file, "")))


def _stat_fields() -> list[str]:
    """/proc/self/stat's fields from the third (state) on: comm, in parentheses, may hold spaces."""
    with open("/proc/self/stat") as f:
        text = f.read()
    return text[text.rindex(")") + 2:].split()


class CommandLine:
    """The memory ``/proc/PID/cmdline`` reads, taken over for the title (Linux only).

    Fields 48-51 of /proc/self/stat are arg_start, arg_end, env_start and env_end. When
    the environment strings follow argv (they always do, as execve lays them out), they
    are moved to the heap first and the area runs to env_end.
    """

    def __init__(self) -> None:
        fields = _stat_fields()
        arg_start, arg_end, env_start, env_end = (int(v) for v in fields[45:49])
        self.start = arg_start
        # argv[0]'s NUL, which Redis's setproctitle marks ('.') under a shorter title
        self.nul = arg_start + len(ctypes.string_at(arg_start))
        self.end = arg_end
        self.libc = ctypes.CDLL(None, use_errno=True)
        if env_start == arg_end and env_end > env_start and self._move_environment():
            self.end = env_end
        self.cleared = False

    def _move_environment(self) -> bool:
        """Copy every environment string out of the area (setenv allocates them anew)."""
        libc = self.libc
        environ = ctypes.POINTER(ctypes.c_char_p).in_dll(libc, "environ")
        entries: list[bytes] = []
        i = 0
        while environ and environ[i] is not None:
            entries.append(environ[i])
            i += 1
        if libc.clearenv() != 0:
            return False
        for entry in entries:
            name, eq, value = entry.partition(b"=")
            if eq and name:
                libc.setenv(name, value, 1)
        return True

    def write(self, title: str) -> None:
        """Put ``title`` (cut to what fits) in place of the command line, as Redis's
        setproctitle does, down to its marks at argv[0]'s old end: a '.' there under a
        title shorter than argv[0], a space when the title ends right at it. The
        kernel shows the whole argv area, NULs and all, while argv's last byte is NUL,
        and only up to the title's NUL once a longer title has overwritten it."""
        data = title.encode(errors="replace")[:min(MAX_TITLE, self.end - self.start - 1)]
        if not self.cleared:
            ctypes.memset(self.start, 0, self.end - self.start)
            self.cleared = True
        else:
            ctypes.memset(self.start, 0, min(MAX_TITLE + 1, self.end - self.start))
        ctypes.memmove(self.start, data, len(data))
        ends = self.start + len(data)
        if ends < self.nul:
            ctypes.memset(self.nul, ord("."), 1)
        elif ends == self.nul and ends + 1 < self.end:
            ctypes.memset(self.nul, ord(" "), 1)
            ctypes.memset(ends + 1, 0, 1)


class ProcTitle:
    """The title as the configuration says: set at start-up once the listeners are up,
    again when the template or a listening port changes, and by each background child.
    ``set-proc-title no`` leaves the command line alone, as in Redis."""

    def __init__(self, values: Callable[[], Mapping[str, str]], config_file: str | None, title: str,
                 enabled: bool) -> None:
        self.values = values  # the parameter values now (a refused CONFIG SET replaces the dict)
        self.config_file = config_file
        self.title = title
        self.line: CommandLine | None = None
        if enabled:
            try:
                self.line = CommandLine()
            except (OSError, ValueError, AttributeError) as e:  # not Linux, or no libc
                log.warning("Unable to set the process title: %s", e)

    def update(self, title: str | None = None) -> None:
        """Rewrite the title; ``title`` stands for {title} (a child's name), else argv[0]."""
        if self.line is None:
            return
        values = self.values()
        text = expand(values["proc-title-template"], variables(values, self.config_file, title or self.title))
        if text is not None:
            self.line.write(text)


def argv0() -> str:
    """{title}: the path this process was started by, as the kernel gave it (a script run
    through its #! line sees its own path, not the interpreter's)."""
    return sys.argv[0] if sys.argv and sys.argv[0] else "rill-server"
