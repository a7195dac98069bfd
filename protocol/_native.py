"""Compiled or pure: which form of this package's hot modules an import gets.

The hot modules are ordinary ``.py`` files, the reference and the fallback. When a C
compiler is present the build (setup.py) also compiles them with Cython, typed by the
``.pxd`` files beside them, into extension modules next to the sources, and records in
``_native.json`` a hash of each source (``.py`` and ``.pxd``) it compiled. Python's
own import would prefer such an extension whatever its age, so a finder installed
first on ``sys.meta_path`` decides instead, once per package:

- compiled: every module the manifest names has its extension and an unchanged
  source, and ``RILL_PURE`` is not set to 1;
- pure: otherwise. A stale extension (its source changed since the build) never runs:
  the whole package falls back to its sources, and ``problem`` says how to rebuild.

All or nothing, and for all of rill's hot packages together: their compiled modules
read each other's compiled types (server's handlers cimport storage's Database), and a
compiled module whose peer ran as source refused to import ("Database size changed")
and rill-server failed at start-up. So one package's stale or missing build sends every
hot package to its sources, and the mode that the start-up log and INFO report is true
of every module. protocol/ and storage/ may not import each other, so each holds an
identical copy of this file (tests/test_native.py keeps them equal).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

MANIFEST = "_native.json"
REBUILD = "run `make native` (or `pip install -e .`) to rebuild, or set RILL_PURE=1"

# rill's packages with hot modules (setup.py's HOT), siblings under rill's directory.
HOT_PACKAGES = ("protocol", "storage", "persistence", "server")


def source_hash(py_path: str) -> str:
    """The hash the build records for a module: its .py and, if present, its .pxd."""
    h = hashlib.sha256()
    for path in (py_path, py_path[:-3] + ".pxd"):
        if os.path.exists(path):
            with open(path, "rb") as f:
                h.update(path.rpartition(".")[2].encode() + b"\0" + f.read())
    return h.hexdigest()


def _extension(py_path: str) -> str | None:
    base = py_path[:-3]
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if os.path.exists(base + suffix):
            return base + suffix
    return None


def _read_build(package: str, directory: str) -> tuple[dict[str, tuple[str, str | None]], list[str]]:
    """A package's build as its manifest records it: module name -> (source, extension
    or None) for every module the build compiled, and those whose source has changed."""
    try:
        with open(os.path.join(directory, MANIFEST)) as f:
            manifest: dict[str, str] = json.load(f)
    except (OSError, ValueError):
        manifest = {}
    modules: dict[str, tuple[str, str | None]] = {}
    stale = []
    for rel, digest in manifest.items():
        py = os.path.join(directory, rel)
        name = package + "." + rel[:-3].replace("/", ".")
        ext = _extension(py)
        modules[name] = (py, ext)
        if ext is not None and (not os.path.exists(py) or source_hash(py) != digest):
            stale.append(name)
    return modules, stale


def _usable(modules: dict[str, tuple[str, str | None]], stale: list[str]) -> bool:
    return bool(modules) and all(ext is not None for _, ext in modules.values()) and not stale


class Native:
    """The mode of one package's hot modules, and the finder that imports them so.

    ``peers`` are the other hot packages, as (package, directory): this one runs
    compiled only if every one of them can too."""

    def __init__(self, package: str, directory: str, peers: tuple[tuple[str, str], ...] = ()) -> None:
        self.package = package
        self.directory = directory
        self.problem = ""
        self.modules, stale = _read_build(package, directory)
        if stale:
            self.problem = (f"compiled {', '.join(sorted(stale))} older than the source; "
                            f"running rill as pure Python: {REBUILD}")
        usable = _usable(self.modules, stale)
        if usable:
            unbuilt = []
            for name, where in peers:
                modules, peer_stale = _read_build(name, where)
                if not _usable(modules, peer_stale):
                    usable = False
                    if not peer_stale:  # a stale peer says so itself
                        unbuilt.append(name)
            if unbuilt:
                self.problem = (f"{', '.join(unbuilt)} not compiled, so {package} runs as "
                                f"pure Python too: {REBUILD}")
        self.compiled = usable and os.environ.get("RILL_PURE", "") != "1"
        self.mode = "compiled" if self.compiled else "pure"

    def find_spec(self, fullname: str, path: object = None, target: ModuleType | None = None) -> ModuleSpec | None:
        """The extension when compiled, else the source (even where an extension exists)."""
        entry = self.modules.get(fullname)
        if entry is None:
            # An extension the manifest does not vouch for (built by hand, or left from
            # an older build): never imported.
            if not fullname.startswith(self.package + "."):
                return None
            rel = fullname[len(self.package) + 1:].replace(".", "/")
            py = os.path.join(self.directory, rel + ".py")
            if _extension(py) is None or not os.path.exists(py):
                return None
            entry = (py, None)
        py, ext = entry
        if self.compiled and ext is not None:
            loader = importlib.machinery.ExtensionFileLoader(fullname, ext)
            return importlib.util.spec_from_file_location(fullname, ext, loader=loader)
        loader = importlib.machinery.SourceFileLoader(fullname, py)
        return importlib.util.spec_from_file_location(fullname, py, loader=loader)

    def compiled_modules(self) -> list[str]:
        """The modules running compiled (none in pure mode)."""
        return sorted(self.modules) if self.compiled else []


def peers_of(package: str, directory: str) -> tuple[tuple[str, str], ...]:
    """The other hot packages beside a hot package of rill's, as (package, directory)."""
    parent, _, leaf = package.rpartition(".")
    if leaf not in HOT_PACKAGES:
        return ()
    root = os.path.dirname(directory)
    return tuple((f"{parent}.{p}", os.path.join(root, p)) for p in HOT_PACKAGES if p != leaf)


def install(package: str, directory: str) -> Native:
    """Decide the package's mode and put its finder ahead of every other."""
    native = Native(package, directory, peers_of(package, directory))
    sys.meta_path.insert(0, native)
    return native
