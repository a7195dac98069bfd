"""Redis 7.0 functions: libraries of Lua functions loaded with FUNCTION LOAD and
called with FCALL / FCALL_RO (Redis's functions.c and function_lua.c).

A library is its code, ``#!lua name=<lib>`` then Lua whose top level registers
functions with ``redis.register_function``. Libraries run in an interpreter of
their own (a second ``LuaEngine``), so nothing EVAL's scripts do reaches them.
What is kept is the code: RDB files, FUNCTION DUMP payloads and the AOF hold
each library's code and loading it again rebuilds the library.

Nothing here knows sockets; the command handlers live in ``commands.functions``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import lupa.lua51 as lua51
from rill.persistence import rdb
from rill.protocol.numbers import string2ll
from rill.protocol.parser import split_args
from rill.protocol.reply import Map, ReplyError, Set, Status
from rill.storage.glob import glob_match

from .scripting import (
    FLAG_ALLOW_CROSS_SLOT,
    FLAG_ALLOW_OOM,
    FLAG_ALLOW_STALE,
    FLAG_NO_CLUSTER,
    FLAG_NO_WRITES,
    LuaEngine,
    ScriptError,
    _stringish,
    running,
)

if TYPE_CHECKING:
    from .client import Client
    from .server import Server

ENGINE = b"LUA"
LOAD_TIMEOUT_MS = 500  # a library's top level should only register functions

# Function flags in Redis's scripts_flags_def order (FUNCTION LIST shows them so).
FUNCTION_FLAGS = (
    (b"no-writes", FLAG_NO_WRITES),
    (b"allow-oom", FLAG_ALLOW_OOM),
    (b"allow-stale", FLAG_ALLOW_STALE),
    (b"no-cluster", FLAG_NO_CLUSTER),
    (b"allow-cross-slot-keys", FLAG_ALLOW_CROSS_SLOT),
)
_FLAG_BY_NAME = {name: bit for name, bit in FUNCTION_FLAGS}

_NAME_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_BAD_NAME = (
    b"Library names can only contain letters, numbers, or underscores(_) and must be at least "
    b"one character long"
)


def valid_name(name: bytes) -> bool:
    """functionsVerifyName: [a-zA-Z0-9_]+ (for libraries and functions alike)."""
    return bool(name) and all(ch in _NAME_CHARS for ch in name)


class FunctionError(Exception):
    """A library that cannot be created, with Redis's message (without the ERR code)."""

    def __init__(self, message: bytes) -> None:
        super().__init__(message)
        self.message = message


class Function:
    __slots__ = ("name", "fn", "library", "desc", "flags")

    def __init__(self, name: bytes, fn: Any, library: Library, desc: bytes | None, flags: int) -> None:
        self.name = name
        self.fn = fn  # the Lua callback
        self.library = library
        self.desc = desc
        self.flags = flags


class Library:
    __slots__ = ("name", "code", "functions")

    def __init__(self, name: bytes, code: bytes) -> None:
        self.name = name
        self.code = code  # the whole payload, shebang included (what RDB and DUMP keep)
        # Case-sensitive within a library, as Redis's per-library dict is.
        self.functions: dict[bytes, Function] = {}


class Libraries:
    """A set of libraries and the function index over them (functionsLibCtx).

    Library names are case-sensitive; function names are looked up ignoring case.
    ``n_functions`` counts as Redis's engine stats do: every function of every
    library, even one whose name another library's function already holds.
    """

    def __init__(self) -> None:
        self.libraries: dict[bytes, Library] = {}
        self.functions: dict[bytes, Function] = {}
        self.n_functions = 0
        self.memory = 0  # Redis's cache_memory: what the structures themselves take

    def link(self, lib: Library) -> None:
        for f in lib.functions.values():
            self.functions.setdefault(f.name.lower(), f)
            self.memory += _function_size(f)
        self.libraries[lib.name] = lib
        self.memory += _library_size(lib)
        self.n_functions += len(lib.functions)

    def unlink(self, lib: Library) -> None:
        for f in lib.functions.values():
            key = f.name.lower()
            if self.functions.get(key) is f:
                del self.functions[key]
            self.memory -= _function_size(f)
        del self.libraries[lib.name]
        self.memory -= _library_size(lib)
        self.n_functions -= len(lib.functions)

    def clear(self) -> None:
        self.libraries.clear()
        self.functions.clear()
        self.n_functions = 0
        self.memory = 0

    def join(self, src: Libraries, replace: bool) -> None:
        """libraryJoin: add ``src``'s libraries, all or none; FunctionError on a clash
        (a library of the same name unless ``replace``, or a function of the same name)."""
        replaced = []
        try:
            for lib in src.libraries.values():
                old = self.libraries.get(lib.name)
                if old is not None:
                    if not replace:
                        raise FunctionError(b"Library %s already exists" % lib.name)
                    self.unlink(old)
                    replaced.append(old)
            for key, f in src.functions.items():
                if key in self.functions:
                    raise FunctionError(b"Function %s already exists" % f.name)
        except FunctionError:
            for old in replaced:
                self.link(old)
            raise
        for lib in src.libraries.values():
            self.link(lib)
        src.clear()


# used_memory_functions counts what Redis's structures take in jemalloc: a function
# (functionInfo, its name, description and Lua reference) and a library
# (functionLibInfo, its name and code), each allocation rounded up to its size class.
def _jemalloc(n: int) -> int:
    if n <= 8:
        return 8
    if n <= 128:
        return (n + 15) & ~15
    step = 1 << (n - 1).bit_length() - 3  # four size classes per doubling
    return (n + step - 1) // step * step


def _sds(s: bytes) -> int:
    n = len(s)
    return _jemalloc((1 if n < 32 else 3 if n < 256 else 5 if n < 65536 else 9) + n + 1)


def _function_size(f: Function) -> int:
    return 48 + _sds(f.name) + (_sds(f.desc) if f.desc is not None else 0) + 8


def _library_size(lib: Library) -> int:
    return 32 + _sds(lib.name) + _sds(lib.code)


def parse_metadata(code: bytes) -> tuple[bytes, bytes, bytes]:
    """functionExtractLibMetaData: (engine, library name, body) of a library's code.

    The body starts at the shebang's newline, so Lua's line numbers are the code's.
    """
    if not code.startswith(b"#!"):
        raise FunctionError(b"Missing library metadata")
    end = code.find(b"\n")
    if end < 0 or b"\0" in code[:end]:  # Redis looks for the newline in a C string
        raise FunctionError(b"Invalid library metadata")
    parts = split_args(code[:end])
    if not parts:
        raise FunctionError(b"Invalid library metadata")
    engine = parts[0][2:]
    name = None
    for part in parts[1:]:
        if part[:5].lower() == b"name=":
            if name is not None:
                raise FunctionError(b"Invalid metadata value, name argument was given multiple times")
            name = part[5:]
            continue
        raise FunctionError(b"Invalid metadata value given: " + part)
    if name is None:
        raise FunctionError(b"Library name was not given")
    return engine, name, code[end:]


class FunctionsEngine:
    """The libraries of one server and the interpreter their functions run in."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.vm = LuaEngine(server, register_function=self._register_function)
        self.libs = Libraries()
        self._loading: Library | None = None  # the library whose top level is running

    # -- creating libraries ----------------------------------------------------
    def create(self, code: bytes, replace: bool, libs: Libraries, timeout_ms: int) -> bytes:
        """functionsCreateWithLibraryCtx: compile ``code``, run its top level and link
        the library into ``libs``; returns its name. FunctionError leaves ``libs`` as it was.

        ``timeout_ms`` 0 means no load timeout (AOF, RDB and replicated loads).
        """
        engine, name, body = parse_metadata(code)
        if not valid_name(name):
            raise FunctionError(_BAD_NAME)
        if engine.upper() != ENGINE:
            raise FunctionError(b"Engine '%s' not found" % engine)
        old = libs.libraries.get(name)
        if old is not None and not replace:
            raise FunctionError(b"Library '%s' already exists" % name)
        if old is not None:
            libs.unlink(old)
        try:
            lib = self._run_library(name, code, body, timeout_ms)
            if not lib.functions:
                raise FunctionError(b"No functions registered")
            for f in lib.functions.values():
                if f.name.lower() in libs.functions:
                    raise FunctionError(b"Function %s already exists" % f.name)
        except FunctionError:
            if old is not None:
                libs.link(old)
            raise
        libs.link(lib)
        return name

    def _run_library(self, name: bytes, code: bytes, body: bytes, timeout_ms: int) -> Library:
        """luaEngineCreate: compile the body and run its top level, which registers."""
        vm = self.vm
        fn, err = vm.compile(body, b"@user_function")
        if fn is None:
            raise FunctionError(b"Error compiling function: " + (err or b""))
        lib = Library(name, code)
        self._loading = lib
        vm.load_deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms else 0.0
        try:
            ok, err = vm.load_library(fn)
        finally:
            self._loading = None
            vm.load_deadline = 0.0
        if not ok:
            raise FunctionError(b"Error registering functions: " + _load_error_text(vm, err))
        return lib

    def _register_function(self, *args: Any) -> None:
        """redis.register_function(name, callback) or redis.register_function{...}."""
        lib = self._loading
        if lib is None:
            raise _lua_error(self.vm, b"redis.register_function can only be called on FUNCTION LOAD command")
        if not 1 <= len(args) <= 2:
            raise _lua_error(self.vm, b"wrong number of arguments to redis.register_function")
        if len(args) == 1:
            name, fn, desc, flags = self._named_args(args[0])
        else:
            name = _stringish(args[0])
            if name is None:
                raise _lua_error(self.vm, b"first argument to redis.register_function must be a string")
            fn = args[1]
            if not _is_function(fn):
                raise _lua_error(self.vm, b"second argument to redis.register_function must be a function")
            desc, flags = None, 0
        if not valid_name(name):
            raise _lua_error(self.vm, _BAD_NAME)
        if name in lib.functions:
            raise _lua_error(self.vm, b"Function already exists in the library")
        lib.functions[name] = Function(name, fn, lib, desc, flags)

    def _named_args(self, table: Any) -> tuple[bytes, Any, bytes | None, int]:
        """luaRegisterFunctionReadNamedArgs: the keys are read in Lua's next() order,
        so the first bad one is the one Redis names."""
        vm = self.vm
        if lua51.lua_type(table) != "table":
            raise _lua_error(vm, (
                b"calling redis.register_function with a single argument is only applicable to Lua "
                b"table (representing named arguments)."
            ))
        name = desc = fn = None
        flags = 0
        for key, value in table.items():
            k = _stringish(key)
            if k is None:
                raise _lua_error(vm, b"named argument key given to redis.register_function is not a string")
            k = k.lower()
            if k == b"function_name":
                name = _stringish(value)
                if name is None:
                    raise _lua_error(vm, b"function_name argument given to redis.register_function must be a string")
            elif k == b"description":
                desc = _stringish(value)
                if desc is None:
                    raise _lua_error(vm, b"description argument given to redis.register_function must be a string")
            elif k == b"callback":
                if not _is_function(value):
                    raise _lua_error(vm, b"callback argument given to redis.register_function must be a function")
                fn = value
            elif k == b"flags":
                if lua51.lua_type(value) != "table":
                    raise _lua_error(vm, (
                        b"flags argument to redis.register_function must be a table representing "
                        b"function flags"
                    ))
                flags = _read_flags(vm, value)
            else:
                raise _lua_error(vm, b"unknown argument given to redis.register_function")
        if name is None:
            raise _lua_error(vm, b"redis.register_function must get a function name argument")
        if fn is None:
            raise _lua_error(vm, b"redis.register_function must get a callback argument")
        return name, fn, desc, flags

    # -- commands' work ------------------------------------------------------------
    def load(self, code: bytes, replace: bool, timeout_ms: int = LOAD_TIMEOUT_MS) -> bytes:
        """FUNCTION LOAD; ReplyError with Redis's message when refused."""
        try:
            return self.create(code, replace, self.libs, timeout_ms)
        except FunctionError as e:
            raise ReplyError(b"ERR " + e.message) from None

    def delete(self, name: bytes) -> None:
        lib = self.libs.libraries.get(name)
        if lib is None:
            raise ReplyError("ERR Library not found")
        self.libs.unlink(lib)

    def flush(self) -> None:
        """FUNCTION FLUSH (and emptyData): every library goes; the interpreter stays."""
        self.libs.clear()

    def codes(self) -> list[bytes]:
        """Every library's code, in library order (what RDB, DUMP and the AOF keep)."""
        return [lib.code for lib in self.libs.libraries.values()]

    def dump(self) -> bytes:
        """FUNCTION DUMP: the RDB function records, the RDB version and a CRC64."""
        return rdb.dump_functions(self.codes())

    def restore(self, payload: bytes, policy: bytes) -> None:
        """FUNCTION RESTORE: all the payload's libraries are added, or none."""
        if not rdb.verify_payload(payload):
            raise ReplyError("ERR DUMP payload version or checksum are wrong")
        incoming = Libraries()
        try:
            for code in rdb.iter_function_records(payload):
                self.create(code, False, incoming, 0)
        except rdb.RdbError as e:
            raise ReplyError(b"ERR " + str(e).encode()) from None
        except FunctionError as e:
            raise ReplyError(b"ERR " + e.message) from None
        if policy == b"flush":
            self.libs = incoming
            return
        try:
            self.libs.join(incoming, replace=policy == b"replace")
        except FunctionError as e:
            raise ReplyError(b"ERR " + e.message) from None

    def build(self, codes: Iterable[bytes], replace: bool) -> Libraries:
        """A separate library set made of ``codes`` (nothing current is touched);
        ReplyError with the first library's failure."""
        libs = Libraries()
        for code in codes:
            try:
                self.create(code, replace, libs, 0)
            except FunctionError as e:
                raise ReplyError(b"ERR " + e.message) from None
        return libs

    def install(self, libs: Libraries, replace: bool) -> None:
        """Make ``libs`` (from an RDB) part of the current set, as rdbLoad does into the
        current context: a clash fails unless ``replace`` (DEBUG RELOAD MERGE)."""
        try:
            self.libs.join(libs, replace)
        except FunctionError as e:
            raise ReplyError(b"ERR " + e.message) from None

    def fcall(self, caller: Client, argv: list[bytes], ro: bool) -> Any:
        """FCALL / FCALL_RO after the function and numkeys checks."""
        f = self.libs.functions.get(argv[1].lower())
        if f is None:
            raise ReplyError("ERR Function not found")
        numkeys = string2ll(argv[2])
        if numkeys is None:
            raise ReplyError("ERR Bad number of keys provided")
        if numkeys > len(argv) - 3:
            raise ReplyError("ERR Number of keys can't be greater than number of args")
        if numkeys < 0:
            raise ReplyError("ERR Number of keys can't be negative")
        return self.vm.execute(
            caller, f.fn, argv[3 : 3 + numkeys], argv[3 + numkeys :], f.flags, ro, f.name, False
        )

    def flags_of(self, name: bytes) -> int | None:
        """The flags of function ``name`` (fcallGetCommandFlags), None if there is none."""
        f = self.libs.functions.get(name.lower())
        return None if f is None else f.flags

    # -- replies -----------------------------------------------------------------
    def list_reply(self, pattern: bytes | None, with_code: bool) -> list:
        out = []
        for lib in self.libs.libraries.values():
            if pattern is not None and not glob_match(pattern, lib.name, nocase=True):
                continue
            entry = Map([
                (b"library_name", lib.name),
                (b"engine", ENGINE),
                (b"functions", [
                    Map([
                        (b"name", f.name),
                        (b"description", f.desc),
                        (b"flags", Set(Status(n) for n, bit in FUNCTION_FLAGS if f.flags & bit)),
                    ])
                    for f in lib.functions.values()
                ]),
            ])
            if with_code:
                entry[b"library_code"] = lib.code
            out.append(entry)
        return out

    def stats_reply(self) -> Map:
        ctx = running(self.server)
        script = None
        if ctx is not None:
            script = Map([
                (b"name", ctx.name),
                (b"command", list(ctx.caller.argv)),
                (b"duration_ms", int((time.monotonic() - ctx.start) * 1000)),
            ])
        libs = self.libs
        return Map([
            (b"running_script", script),
            (b"engines", Map([
                (ENGINE, Map([(b"libraries_count", len(libs.libraries)), (b"functions_count", libs.n_functions)])),
            ])),
        ])

    # -- INFO ------------------------------------------------------------------
    def vm_memory(self) -> int:
        """used_memory_vm_functions: the functions interpreter's heap."""
        return self.vm.memory()

    def overhead(self) -> int:
        """used_memory_functions: the library and function structures (functionsMemoryOverhead)."""
        n = len(self.libs.functions)
        slots = max(4, 1 << (n - 1).bit_length()) if n else 0  # the function index's hash table
        return 200 + 24 * n + 8 * slots + self.libs.memory


def _is_function(v: Any) -> bool:
    """lua_isfunction: a Lua function, or a C function (a Python callable to Lua)."""
    return lua51.lua_type(v) == "function" or (lua51.lua_type(v) is None and callable(v))


def _read_flags(vm: LuaEngine, table: Any) -> int:
    """The flag names at table[1], table[2], ... up to the first nil (case-insensitive)."""
    flags = 0
    i = 1
    while True:
        item = table[i]
        if item is None:
            return flags
        name = _stringish(item)
        bit = _FLAG_BY_NAME.get(name.lower()) if name is not None else None
        if bit is None:
            raise _lua_error(vm, b"unknown flag given")
        flags |= bit
        i += 1


def _lua_error(vm: LuaEngine, message: bytes) -> ScriptError:
    """luaPushError + luaError: the error table {err="ERR message"}."""
    return ScriptError(vm.error_table(message, False))


def _load_error_text(vm: LuaEngine, err: Any) -> bytes:
    """luaExtractErrorInformation's message for an error raised at load time."""
    if lua51.lua_type(err) == "table":
        msg = _stringish(err[b"err"])
        return msg if msg is not None else b"(null)"
    text = _stringish(err)
    return b"ERR " + text if text is not None else b"(null)"
