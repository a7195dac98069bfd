"""TLS as Redis 6/7 serve it: the SSL contexts the ``tls-*`` parameters describe.

:class:`TLS` holds the server-side context (the TLS port's) and the client-side one
(outgoing links: replication to a master, later the Active-Active peer links). Both
are built from the configuration at once, as Redis's tlsConfigure: a start-up, a
CONFIG SET of any ``tls-*`` parameter, or ``tls-port`` turning TLS on builds a fresh
pair; if anything fails the old pair stays and the reasons go to the log in Redis's
words. Connections already open keep the context they were made with.

Python's ``ssl`` module has no call for a few of the settings Redis makes (TLS 1.3
ciphersuites, the session cache's size, timeout and id context, automatic DH
parameters), and its certificate loading hides OpenSSL's error strings, which Redis
logs verbatim. Those go to the libssl that ``ssl`` itself is linked with, through
ctypes, on the very ``SSL_CTX`` the ``SSLContext`` wraps (checked before use).

:class:`TLSListener` accepts on the TLS port; once its handshake is done a connection
is an ordinary :class:`~rill.server.connection.Connection` over the TLS transport.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import socket
import ssl
import warnings
from typing import TYPE_CHECKING, Any

from .config import Config, ConfigError
from .connection import Connection

if TYPE_CHECKING:
    from .server import Server

log = logging.getLogger("rill")

# A handshake that does not finish in this time is dropped (the client never sent its
# hello, or stalls mid-way); other clients are served meanwhile.
HANDSHAKE_TIMEOUT = 10.0

RECONFIGURE_ERROR = "Unable to update TLS configuration. Check server logs."

_PROTOCOLS = {
    "tlsv1": ssl.OP_NO_TLSv1,
    "tlsv1.1": ssl.OP_NO_TLSv1_1,
    "tlsv1.2": ssl.OP_NO_TLSv1_2,
    "tlsv1.3": ssl.OP_NO_TLSv1_3,
}
_DEFAULT_PROTOCOLS = ("tlsv1.2", "tlsv1.3")

_AUTH_CLIENTS = {"no": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "yes": ssl.CERT_REQUIRED}

# OpenSSL's SSL_CTX_ctrl commands and values (ssl.h), for the macros ctypes cannot call.
_CTRL_SET_SESS_CACHE_SIZE = 42
_CTRL_GET_SESS_CACHE_SIZE = 43
_CTRL_SET_SESS_CACHE_MODE = 44
_CTRL_SET_DH_AUTO = 118
_SESS_CACHE_OFF = 0
_SESS_CACHE_SERVER = 2
_FILETYPE_PEM = 1

_PASSWD_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


class TLSConfigError(Exception):
    """The configuration does not make a usable context; ``str()`` is Redis's log line."""


class _OpenSSL:
    """The libssl the ``ssl`` module uses, for what ``ssl`` has no call for."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        vp, cp, c_long, c_int = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_long, ctypes.c_int
        self.lib = lib
        sigs: dict[str, tuple[Any, list[Any]]] = {
            "SSL_CTX_get_options": (ctypes.c_uint64, [vp]),
            "SSL_CTX_use_certificate_chain_file": (c_int, [vp, cp]),
            "SSL_CTX_use_PrivateKey_file": (c_int, [vp, cp, c_int]),
            "SSL_CTX_load_verify_locations": (c_int, [vp, cp, cp]),
            "SSL_CTX_set_ciphersuites": (c_int, [vp, cp]),
            "SSL_CTX_ctrl": (c_long, [vp, c_int, c_long, vp]),
            "SSL_CTX_set_timeout": (c_long, [vp, c_long]),
            "SSL_CTX_get_timeout": (c_long, [vp]),
            "SSL_CTX_set_session_id_context": (c_int, [vp, cp, ctypes.c_uint]),
            "SSL_CTX_set_default_passwd_cb": (None, [vp, vp]),
            "ERR_get_error": (ctypes.c_ulong, []),
            "ERR_error_string_n": (None, [ctypes.c_ulong, cp, ctypes.c_size_t]),
            "ERR_clear_error": (None, []),
        }
        for name, (restype, argtypes) in sigs.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name, fn)

    def ctx(self, context: ssl.SSLContext) -> int:
        """The ``SSL_CTX *`` an SSLContext wraps: the first field after the object header
        (CPython's PySSLContext), confirmed by reading the options back through it."""
        ptr = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
        if not ptr or self.SSL_CTX_get_options(ptr) != context.options & 0xFFFFFFFFFFFFFFFF:
            raise TLSConfigError("Failed to configure TLS: cannot reach the OpenSSL context of Python's ssl module")
        return ptr

    def error(self) -> str:
        """OpenSSL's first queued error, as ERR_error_string_n writes it; the queue is emptied."""
        code = self.ERR_get_error()
        buf = ctypes.create_string_buffer(256)
        self.ERR_error_string_n(code, buf, len(buf))
        self.ERR_clear_error()
        return buf.value.decode(errors="replace")


_LIBSSL: _OpenSSL | None = None


def _openssl() -> _OpenSSL:
    """The libssl already loaded by ``ssl`` (found in the process's maps, so a second
    copy of OpenSSL is never loaded beside it)."""
    global _LIBSSL
    if _LIBSSL is None:
        path = None
        try:
            with open("/proc/self/maps") as f:
                for line in f:
                    name = line.rsplit(" ", 1)[-1].strip()
                    if "/libssl.so" in name:
                        path = name
                        break
        except OSError:
            pass
        path = path or ctypes.util.find_library("ssl")
        if path is None:
            raise TLSConfigError("Failed to configure TLS: libssl not found")
        _LIBSSL = _OpenSSL(ctypes.CDLL(path))
    return _LIBSSL


def _protocol_options(value: str) -> int:
    """The OP_NO_* options that leave exactly the ``tls-protocols`` listed (default
    TLSv1.2 and TLSv1.3), as Redis's parseProtocolsConfig."""
    names = value.lower().split(" ") if value else list(_DEFAULT_PROTOCOLS)
    for name in names:
        if name not in _PROTOCOLS:
            raise TLSConfigError("Invalid tls-protocols specified. "
                                 "Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.")
    options = 0
    for name, op in _PROTOCOLS.items():
        if name not in names:
            options |= op
    return options


def _base_context(config: Config, server_side: bool, client_files: bool) -> ssl.SSLContext:
    """What Redis's createSSLContext sets on both sides: protocols, certificate and key,
    CA, ciphers and TLS 1.3 ciphersuites."""
    ossl = _openssl()
    names = (("tls-client-cert-file", "tls-client-key-file", "tls-client-key-file-pass") if client_files
             else ("tls-cert-file", "tls-key-file", "tls-key-file-pass"))
    cert, key, password = (config[name] for name in names)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server_side else ssl.PROTOCOL_TLS_CLIENT)
    if not server_side:
        ctx.check_hostname = False  # Redis verifies the peer's chain, never its name
    with warnings.catch_warnings():  # OP_NO_TLS* are deprecated in Python, not in OpenSSL
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        ctx.maximum_version = ssl.TLSVersion.MAXIMUM_SUPPORTED
        ctx.options |= _protocol_options(config["tls-protocols"])
    # Python prefers the server's cipher order by default; Redis only when asked.
    ctx.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
    ctx.verify_mode = ssl.CERT_REQUIRED
    ptr = ossl.ctx(ctx)
    secret = password.encode() if password else None

    @_PASSWD_CB
    def passwd_cb(buf: int, size: int, rwflag: int, userdata: int) -> int:
        if secret is None or len(secret) > size:
            return -1
        ctypes.memmove(buf, secret, len(secret))
        return len(secret)

    ossl.SSL_CTX_set_default_passwd_cb(ptr, ctypes.cast(passwd_cb, ctypes.c_void_p))
    try:
        if ossl.SSL_CTX_use_certificate_chain_file(ptr, cert.encode()) <= 0:
            raise TLSConfigError(f"Failed to load certificate: {cert}: {ossl.error()}")
        if ossl.SSL_CTX_use_PrivateKey_file(ptr, key.encode(), _FILETYPE_PEM) <= 0:
            raise TLSConfigError(f"Failed to load private key: {key}: {ossl.error()}")
    finally:
        ossl.SSL_CTX_set_default_passwd_cb(ptr, None)
    ca_file, ca_dir = config["tls-ca-cert-file"], config["tls-ca-cert-dir"]
    if (ca_file or ca_dir) and ossl.SSL_CTX_load_verify_locations(
            ptr, ca_file.encode() or None, ca_dir.encode() or None) <= 0:
        raise TLSConfigError(f"Failed to configure CA certificate(s) file/directory: {ossl.error()}")
    try:
        ctx.set_ciphers(config["tls-ciphers"] or "DEFAULT")  # OpenSSL's list, as Redis, not Python's
    except ssl.SSLError:
        raise TLSConfigError(f"Failed to configure ciphers: {config['tls-ciphers']}") from None
    suites = config["tls-ciphersuites"]
    if suites and not ossl.SSL_CTX_set_ciphersuites(ptr, suites.encode()):
        ossl.ERR_clear_error()
        raise TLSConfigError(f"Failed to configure ciphersuites: {suites}")
    return ctx


def build_contexts(config: Config) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """The server-side and client-side contexts for ``config``, or TLSConfigError with
    the line Redis logs for the first problem (its tlsConfigure, check for check)."""
    if not config["tls-cert-file"]:
        raise TLSConfigError("No tls-cert-file configured!")
    if not config["tls-key-file"]:
        raise TLSConfigError("No tls-key-file configured!")
    # (tls-cluster, the third condition in Redis, stays at its default: rill has no cluster bus)
    if ((config["tls-auth-clients"] != "no" or config.bool("tls-replication"))
            and not config["tls-ca-cert-file"] and not config["tls-ca-cert-dir"]):
        raise TLSConfigError("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when "
                             "tls-cluster, tls-replication or tls-auth-clients are enabled!")
    _protocol_options(config["tls-protocols"])
    ossl = _openssl()
    server = _base_context(config, server_side=True, client_files=False)
    ptr = ossl.ctx(server)
    if config.bool("tls-session-caching"):
        ossl.SSL_CTX_ctrl(ptr, _CTRL_SET_SESS_CACHE_MODE, _SESS_CACHE_SERVER, None)
        ossl.SSL_CTX_ctrl(ptr, _CTRL_SET_SESS_CACHE_SIZE, config.int("tls-session-cache-size"), None)
        ossl.SSL_CTX_set_timeout(ptr, config.int("tls-session-cache-timeout"))
        ossl.SSL_CTX_set_session_id_context(ptr, b"redis", 5)
    else:
        # No cache, and no stateless tickets either (OpenSSL would resume from those
        # without a cache; Redis 7.0 fails such a resumption with an internal error
        # alert): every connection makes a full handshake.
        ossl.SSL_CTX_ctrl(ptr, _CTRL_SET_SESS_CACHE_MODE, _SESS_CACHE_OFF, None)
        server.options |= ssl.OP_NO_TICKET
    if config.bool("tls-prefer-server-ciphers"):
        server.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    server.options |= ssl.OP_SINGLE_DH_USE
    server.verify_mode = _AUTH_CLIENTS[config["tls-auth-clients"]]
    dh = config["tls-dh-params-file"]
    if dh:
        try:
            server.load_dh_params(dh)
        except ssl.SSLError:
            raise TLSConfigError(f"{dh}: failed to read DH params.") from None
        except OSError as e:
            raise TLSConfigError(f"Failed to load {dh}: {e.strerror}") from None
    else:
        ossl.SSL_CTX_ctrl(ptr, _CTRL_SET_DH_AUTO, 1, None)
    # Outgoing links present tls-client-cert-file/-key-file when both are set, else
    # the server's own certificate, as Redis.
    client_files = bool(config["tls-client-cert-file"] and config["tls-client-key-file"])
    client = _base_context(config, server_side=False, client_files=client_files)
    return server, client


def session_cache_settings(context: ssl.SSLContext) -> tuple[int, int]:
    """(cache size, timeout) of a server context, as OpenSSL holds them (for tests and INFO-free checks)."""
    ossl = _openssl()
    ptr = ossl.ctx(context)
    return ossl.SSL_CTX_ctrl(ptr, _CTRL_GET_SESS_CACHE_SIZE, 0, None), ossl.SSL_CTX_get_timeout(ptr)


def tls_wanted(config: Config) -> bool:
    """Whether the configuration uses TLS at all (Redis configures it only then)."""
    return bool(config.int("tls-port")) or config.bool("tls-replication")


class TLS:
    """The server's current contexts; replaced whole by :meth:`configure`."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.server_context: ssl.SSLContext | None = None
        self._client_context: ssl.SSLContext | None = None

    @property
    def configured(self) -> bool:
        return self.server_context is not None

    def configure(self) -> None:
        """Build a new pair of contexts; on failure log Redis's reason and raise
        TLSConfigError, keeping the old pair."""
        try:
            server, client = build_contexts(self.config)
        except TLSConfigError as e:
            log.warning("%s", e)
            raise
        self.server_context, self._client_context = server, client

    def client_context(self) -> ssl.SSLContext:
        """The context outgoing links (replication, peer links) connect with: it verifies
        the peer's chain against the configured CA and presents our certificate."""
        if self._client_context is None:
            self.configure()
        assert self._client_context is not None
        return self._client_context

    def install(self, server: Server) -> None:
        """CONFIG SET of the tls-* parameters: reconfigure (when TLS is in use), refusing
        the change with Redis's error if the new configuration does not load.
        tls-auth-clients applies to new connections without a rebuild, as in Redis."""
        config = self.config

        def reconfigure(_value: str) -> None:
            if not tls_wanted(config):
                return
            try:
                self.configure()
            except TLSConfigError:
                raise ConfigError(RECONFIGURE_ERROR) from None

        for name in config.params:
            if name.startswith("tls-") and name not in ("tls-port", "tls-auth-clients"):
                config.appliers[name] = reconfigure

        def auth_clients(value: str) -> None:
            if self.server_context is not None:
                self.server_context.verify_mode = _AUTH_CLIENTS[value]

        config.appliers["tls-auth-clients"] = auth_clients


class TLSListener:
    """The TLS port: accepts connections itself and hands each to the loop with the
    server context current at accept time (a reload affects new connections only).

    The loop's own TLS server would fix the context for the listener's lifetime, and
    a plain listener upgraded with start_tls can lose the client's first bytes to the
    plain protocol; an accepted socket given to connect_accepted_socket has neither
    problem. A handshake that fails (plain text, garbage, a refused certificate) or
    stalls past HANDSHAKE_TIMEOUT closes that connection and nothing else.
    """

    # As Redis's MAX_ACCEPTS_PER_CALL: a burst of connections cannot starve the clients.
    MAX_ACCEPTS = 1000

    def __init__(self, server: Server, sock: socket.socket) -> None:
        self.server = server
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self.handshakes: set[asyncio.Task] = set()
        self.loop.add_reader(sock.fileno(), self._accept)

    def _accept(self) -> None:
        for _ in range(self.MAX_ACCEPTS):
            try:
                conn, _addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                log.warning("Accepting client connection: %s", e.strerror or e)
                return
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = self.loop.create_task(self._handshake(conn))
            self.handshakes.add(task)
            task.add_done_callback(self.handshakes.discard)

    async def _handshake(self, sock: socket.socket) -> None:
        server = self.server
        context = server.tls.server_context
        assert context is not None
        conn = Connection(server)
        conn.tls = True
        try:
            peer = sock.getpeername()
        except OSError:
            peer = ("?", 0)
        try:
            await self.loop.connect_accepted_socket(lambda: conn, sock, ssl=context,
                                                    ssl_handshake_timeout=HANDSHAKE_TIMEOUT)
        except (TimeoutError, OSError, EOFError) as e:
            log.warning("Error accepting a client connection: %s (conn: addr=%s:%s)", _reason(e), peer[0], peer[1])
            sock.close()

    def close(self) -> None:
        """Stop accepting (handshakes under way finish; their connections are clients)."""
        if self.sock.fileno() >= 0:
            self.loop.remove_reader(self.sock.fileno())
            self.sock.close()


def _reason(e: BaseException) -> str:
    """OpenSSL's reason text ("tlsv1 alert unknown ca"), as Redis logs it after the code."""
    if isinstance(e, ssl.SSLError):
        text = str(e.args[1]) if len(e.args) > 1 else str(e)
        if text.startswith("[") and "] " in text:
            text = text.split("] ", 1)[1].rsplit(" (_ssl.c", 1)[0]
        return text
    if isinstance(e, TimeoutError):
        return "handshake timed out"
    return str(e) or type(e).__name__
