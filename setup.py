"""The compiled hot core: the same .py sources, compiled by Cython where a C compiler is.

pyproject.toml holds everything else about the distribution; this file only adds the
extension modules. Each module in HOT is compiled from its own ``.py`` (Cython's
pure-Python mode: the ``.pxd`` beside it, if any, types it), and the build records a
hash of each compiled source in its package's ``_native.json``; the package's import
shim (``_native.py``) runs the extensions only while every hash still matches, and the
sources otherwise. Without Cython or without a compiler nothing is compiled and rill
runs as pure Python: the extensions are optional.

``pip install -e .`` and ``make native`` (``python setup.py build_ext --inplace``,
which ``make run`` and ``make test`` run first) build them next to the sources;
RILL_BUILD_NATIVE=0 builds none (the Makefile's install, which builds them after).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))

# package -> its folder, and the hot modules compiled in it (paths inside the folder).
PACKAGES = {"rill.protocol": "protocol", "rill.storage": "storage", "rill.persistence": "persistence",
            "rill.server": "server"}
HOT = {
    "rill.protocol": ["parser.py", "reply.py", "effects.py"],
    "rill.storage": ["listpack.py", "rax.py", "stream/stream.py", "stream/fastread.py", "stream/cache.py", "stream/groups.py",
                     "stream/active.py", "cells.py", "keyspace.py", "activelist.py"],
    "rill.persistence": ["nodes.py"],
    "rill.server": ["fastpath.py", "connection.py", "iostats.py", "commandstats.py", "commands/table.py", "evict.py", "commands/strings.py",
                    "commands/lists.py", "commands/hashes.py", "commands/sets.py", "commands/zsets.py", "commands/keys.py", "commands/connection.py", "commands/streams.py", "commands/stream_groups.py",
                    "commands/stream_args.py", "commands/stream_replies.py", "activeactive/keyed.py",
                    "activeactive/engine.py", "activeactive/backlog.py", "activeactive/links.py", "activeactive/lists.py"],
}

# Compiled at -O1, not -O2: untyped modules (no .pxd) whose C is calls into the CPython API,
# where -O2 only lengthens the compile (about twice as long) and saves no instructions at
# run time. Measured with perf stat -e instructions:u on an in-process loop of their
# commands, swapping this one module's -O1 build in: within the noise of two -O2 runs for
# each of these. The Active-Active write path (engine, keyed, cells) and the consumer
# groups and their replies (groups, stream_groups, stream_replies) came out 0.2-0.7% dearer
# at -O1, so they keep -O2.
FAST_COMPILE = {"rill.storage.listpack", "rill.storage.rax", "rill.server.evict", "rill.server.commands.strings",
                "rill.server.commands.lists", "rill.server.commands.stream_args", "rill.server.commands.hashes",
                "rill.server.commands.sets", "rill.server.commands.zsets", "rill.server.commands.keys",
                "rill.server.commands.connection",
                "rill.server.connection"}


def source_hash(py_path: str) -> str:
    """Must equal ``_native.source_hash`` (tests/test_native.py checks it does)."""
    h = hashlib.sha256()
    for path in (py_path, py_path[:-3] + ".pxd"):
        if os.path.exists(path):
            with open(path, "rb") as f:
                h.update(path.rpartition(".")[2].encode() + b"\0" + f.read())
    return h.hexdigest()


# extension name -> (package, path in its folder, source hash when Cython translated it)
COMPILED: dict[str, tuple[str, str, str]] = {}


class OptionalBuildExt(build_ext):
    """Records each built module in its package's manifest; a failed compile leaves
    rill pure Python instead of failing the install."""

    def finalize_options(self) -> None:
        super().finalize_options()
        # One compiler per core (build_ext -j): the C of a dozen modules took 2 min 46 s
        # one after the other, the better part of CI's set-up.
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        self.built: set[str] = set()
        # Longest compile first: with one compiler per core, the build ends when the
        # last queued module does, so engine.c (the biggest C, ~15% of all) must not be
        # the last to start. The C files exist by now (cythonize ran at import).
        self.extensions.sort(key=lambda ext: -sum(os.path.getsize(s) for s in ext.sources if os.path.exists(s)))
        if not self.inplace:
            # A wheel packs whatever its build directory holds: compile afresh rather
            # than trust an object an earlier build left there.
            self.force = True
        manifests = {package: os.path.join(os.path.dirname(self.get_ext_fullpath(package + "._native")),
                                           "_native.json") for package in HOT}
        # An interrupted or failed build must leave nothing that vouches for an old extension.
        for path in manifests.values():
            if os.path.exists(path):
                os.unlink(path)
        try:
            super().run()
        except Exception as e:  # no compiler, missing headers: the sources still run
            print(f"rill: compiled modules not built ({e}); rill runs as pure Python", file=sys.stderr)
        for package, path in manifests.items():
            entries = {rel: digest for name, (pkg, rel, digest) in COMPILED.items()
                       if pkg == package and name in self.built}
            if entries:
                with open(path, "w") as f:
                    json.dump(entries, f, indent=1, sort_keys=True)
                    f.write("\n")

    def build_extension(self, ext) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:
            print(f"rill: {ext.name} not compiled ({e}); it runs as pure Python", file=sys.stderr)
        else:
            self.built.add(ext.name)


def extensions() -> list:
    # The Makefile's install step sets this and builds in place right after: pip's
    # editable build compiles into a temporary directory, which the in-place build
    # cannot see, so every module was compiled twice (CI: 2 min 42 s of gcc twice).
    if os.environ.get("RILL_BUILD_NATIVE") == "0":
        print("rill: RILL_BUILD_NATIVE=0: compiled modules left to `make native`", file=sys.stderr)
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("rill: Cython not installed; rill runs as pure Python", file=sys.stderr)
        return []
    from setuptools import Extension

    # Cython finds a module's .pxd by its full name (rill/storage/stream/stream.pxd), but
    # the sources sit in folders that package-dir maps to rill.*: give it that layout.
    include = os.path.join(ROOT, "build", "cython-include")
    shutil.rmtree(include, ignore_errors=True)
    exts = []
    for package, rels in HOT.items():
        folder = PACKAGES[package]
        for rel in rels:
            py = os.path.join(folder, rel)
            name = package + "." + rel[:-3].replace("/", ".")
            COMPILED[name] = (package, rel, source_hash(os.path.join(ROOT, py)))
            pxd = os.path.join(ROOT, py[:-3] + ".pxd")
            if os.path.exists(pxd):
                dest = os.path.join(include, *name.split(".")) + ".pxd"
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                shutil.copy2(pxd, dest)  # keeps its time: Cython rebuilds by timestamps
            # No debug info: it triples the compile time and the size of the modules.
            flags = ["-g0", *(["-O1"] if name in FAST_COMPILE else [])] if os.name == "posix" else []
            exts.append(Extension(name, [py], extra_compile_args=flags))
    unknown = FAST_COMPILE - set(COMPILED)
    if unknown:  # a renamed module would silently go back to -O2
        raise SystemExit(f"setup.py: FAST_COMPILE names no hot module: {sorted(unknown)}")
    return cythonize(
        exts,
        # Annotations stay documentation, as under CPython: with annotation_typing,
        # Cython would turn ``s: bytes`` into a check that refuses a bytearray.
        # Types come from the .pxd files only.
        compiler_directives={"language_level": 3, "annotation_typing": False},
        build_dir="build/cython",
        include_path=[include],
        quiet=True,
        nthreads=os.cpu_count() or 1,  # Cython's own translation, module by module
    )


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
