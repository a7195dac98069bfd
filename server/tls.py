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

:func:`serve_tls` listens on the TLS port; each connection is a :class:`TLSLayer`
over the TCP transport, under an ordinary :class:`~rill.server.connection.Connection`.
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


class TLSLayer(asyncio.Protocol):
    """One TLS connection: the protocol of the plain TCP transport, and the transport
    its :class:`~rill.server.connection.Connection` writes to.

    OpenSSL runs over memory buffers (``SSLObject`` with two ``MemoryBIO``), so rill
    holds the ciphertext itself rather than the event loop's TLS transport:

    - the client exists from accept, as Redis creates it before the handshake
      (``connected_clients``, CLIENT LIST, CLIENT KILL see it); it counts in
      ``total_connections_received`` and meets protected mode once the handshake is
      done, as Redis's clientAcceptHandler;
    - a busy script's loop (serve_while_busy) can read the socket and decrypt with
      :meth:`feed`, so TLS clients get BUSY (and can SCRIPT KILL) as plain ones do;
    - a read is decrypted whole, at once, and handed to the server's reply batch as one
      buffer: its commands run with the batch's, after every read of the loop
      iteration is decrypted (see :class:`~rill.server.connection.ReplyBatch`); a
      batch of replies is one ``SSL_write`` and one socket write.

    A handshake that fails (plain text, garbage, a refused certificate) sends
    OpenSSL's alert, if any, and closes that connection; one that stalls past
    HANDSHAKE_TIMEOUT is dropped. Closing a connection after its handshake sends
    close_notify first, as Redis's connTLSClose.
    """

    def __init__(self, server: Server, context: ssl.SSLContext) -> None:
        self.server = server
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.sslobj = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self._bind()
        self.conn = Connection(server)
        self.conn.tls = self
        self.raw: asyncio.Transport | None = None
        self.ready = False  # handshake done
        self.held: list[bytes] = []  # replies written before the handshake finished
        self._notified = False  # the peer's close_notify (or the TCP end) came
        self._input = b""  # decrypted, waiting for the reply batch to run it
        self._queued = False  # in the reply batch's inbox
        self._eof = False  # the peer's end of data was passed on
        self._closed = False
        self._timer: asyncio.TimerHandle | None = None

    def _bind(self) -> None:
        """The per-record calls, bound once. ``ssl.SSLObject``'s read, write and pending
        only forward to the ``_ssl`` object it wraps (a Python call each, per record);
        that object's own methods are used when present, with the same arguments."""
        inner = getattr(self.sslobj, "_sslobj", self.sslobj)
        self._read = inner.read
        self._write = inner.write
        self._pending = inner.pending

    # -- the TCP transport's protocol --------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.raw = transport  # type: ignore[assignment]
        self.conn.connection_made(self)  # type: ignore[arg-type]
        if not self._closed:
            loop = self.server.loop or asyncio.get_event_loop()
            self._timer = loop.call_later(HANDSHAKE_TIMEOUT, self._timed_out)

    def data_received(self, data: bytes) -> None:
        plain = self.feed(data)
        if self._queued:
            self._input += plain  # (the end of data, if it came, waits for deliver too)
        elif plain:
            self._input = plain
            self._queued = True
            self.server.reply_batch.deliver(self)
        elif self._notified:
            self._peer_done()

    def deliver(self) -> None:
        """Run the decrypted input (the reply batch calls this, before its writes), then
        pass on the end of data if it came after that input."""
        data, self._input = self._input, b""
        self._queued = False
        if data and not self._closed:
            self.conn.data_received(data)
        if self._notified:
            self._peer_done()

    def take_input(self) -> bytes:
        """The decrypted input not run yet, for a busy script's loop to answer now."""
        data, self._input = self._input, b""
        return data

    def eof_received(self) -> bool:
        if not self.ready:
            if not self._closed:
                self._failed("unexpected eof while reading")
            return False
        if self._queued:
            self._notified = True  # after the input still queued, as the loop read it
        else:
            self._peer_done()
        return not self._closed  # the Connection closes us once its last replies are out

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.conn.connection_lost(exc)

    def pause_writing(self) -> None:
        self.conn.pause_writing()

    def resume_writing(self) -> None:
        self.conn.resume_writing()

    # -- decrypting ----------------------------------------------------------------------
    def feed(self, data: bytes) -> bytes:
        """Ciphertext in, the plaintext it completes out (b"" if none yet); advances
        the handshake while there is one, and answers what OpenSSL must answer."""
        if self._closed:
            return b""
        incoming = self.incoming
        incoming.write(data)
        if not self.ready and not self._handshake():
            return b""
        read = self._read
        plain = b""
        chunks = None
        try:
            plain = read(_READ_SIZE)  # most reads bring one record: one call, no list
            if not plain:
                self._notified = True  # close_notify: the peer sends nothing more
            elif incoming.pending or self._pending():
                chunks = [plain]
                while incoming.pending or self._pending():
                    chunk = read(_READ_SIZE)
                    if not chunk:
                        self._notified = True
                        break
                    chunks.append(chunk)
        except ssl.SSLWantReadError:
            pass  # the rest of a record is still on its way
        except ssl.SSLError as e:
            log.warning("Error reading from a TLS client: %s (conn: addr=%s)", _reason(e), self._addr())
            self._send_pending()
            self.conn.drop()
            return b""
        if self.outgoing.pending:  # e.g. a TLS 1.3 KeyUpdate's answer
            self._send_pending()
        return plain if chunks is None else b"".join(chunks)

    def _handshake(self) -> bool:
        try:
            self.sslobj.do_handshake()
        except ssl.SSLWantReadError:
            self._send_pending()
            return False
        except ssl.SSLError as e:
            self._failed(_reason(e))
            return False
        self.ready = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._send_pending()  # the last flight (and TLS 1.3 session tickets)
        held, self.held = self.held, []
        for data in held:
            self.write(data)
        self.conn.admit()
        return not self._closed

    def _failed(self, reason: str) -> None:
        log.warning("Error accepting a client connection: %s (conn: addr=%s)", reason, self._addr())
        self._send_pending()  # OpenSSL's alert, if it made one
        self.conn.drop()

    def _timed_out(self) -> None:
        self._timer = None
        if not self.ready and not self._closed:
            self._failed("handshake timed out")

    def _addr(self) -> str:
        client = self.conn.client
        return client.addr if client is not None else "?"

    def _peer_done(self) -> None:
        if not self._eof:
            self._eof = True
            self.conn.eof_received()

    def _send_pending(self) -> None:
        if self.outgoing.pending and self.raw is not None and not self.raw.is_closing():
            self.raw.write(self.outgoing.read())

    # -- the Connection's transport ----------------------------------------------------
    def write(self, data: bytes) -> None:
        if self._closed:
            return
        if not self.ready:
            self.held.append(data)
            return
        try:
            n = self._write(data)
            while n < len(data):
                n += self._write(memoryview(data)[n:])
        except ssl.SSLError as e:
            log.warning("Error writing to a TLS client: %s (conn: addr=%s)", _reason(e), self._addr())
            self.conn.drop()
            return
        self.raw.write(self.outgoing.read())  # type: ignore[union-attr]

    def close(self) -> None:
        """close_notify after a finished handshake, then the TCP close (what is
        buffered still goes out); replies held for a handshake never made are dropped,
        as Redis's maxclients error over TLS is."""
        if not self._finish():
            return
        if self.ready:
            try:
                self.sslobj.unwrap()
            except (ssl.SSLError, ValueError):
                pass  # sent ours; the peer's close_notify is not waited for
        if self.raw is not None:
            if self.outgoing.pending and not self.raw.is_closing():
                self.raw.write(self.outgoing.read())
            self.raw.close()

    def abort(self) -> None:
        """A killed or evicted client: the TCP connection goes at once, unsent output
        and all (no close_notify: Redis frees such a client without one)."""
        if self._finish() and self.raw is not None:
            self.raw.abort()

    def _finish(self) -> bool:
        """Mark the layer closed and stop its handshake timer; False if it already was."""
        if self._closed:
            return False
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return True

    def is_closing(self) -> bool:
        return self._closed or self.raw is None or self.raw.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self.sslobj
        return self.raw.get_extra_info(name, default) if self.raw is not None else default

    def get_write_buffer_size(self) -> int:
        return self.raw.get_write_buffer_size() if self.raw is not None else 0

    def pause_reading(self) -> None:
        if self.raw is not None and not self.raw.is_closing():
            self.raw.pause_reading()

    def resume_reading(self) -> None:
        if self.raw is not None and not self.raw.is_closing():
            self.raw.resume_reading()


# A TLS record carries at most 16 KB of plaintext; a read returns one record.
_READ_SIZE = 16384


async def serve_tls(server: Server, sock: socket.socket) -> asyncio.AbstractServer:
    """Serve the TLS port on a bound socket. Each connection takes the server context
    current at its accept (a certificate reload affects new connections only)."""

    def layer() -> TLSLayer:
        context = server.tls.server_context
        assert context is not None
        return TLSLayer(server, context)

    loop = asyncio.get_running_loop()
    return await loop.create_server(layer, sock=sock, backlog=server.config.int("tcp-backlog"))


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
