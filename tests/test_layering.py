"""The layering, held by tests because CI runs ``make test`` and not ``make lint``.

pyproject.toml states the layers as import-linter contracts (``make lint`` checks them too;
``acyclic_modules`` is rill's own contract type, in tools/import_contracts.py); the ceiling on function-level imports is checked here, with ``ast``, because import-linter
sees an import inside a function as any other.
"""

from __future__ import annotations

import ast
import functools
import io
import subprocess
import sys
import tokenize
from collections.abc import Iterable, Iterator
from pathlib import Path

from tests.support import require_module

ROOT = Path(__file__).resolve().parent.parent
# The folders that install as rill's packages (pyproject.toml's package-dir).
SOURCE_FOLDERS = ["server", "protocol", "storage", "persistence", "pipeline"]
# Imports inside functions hide the real dependencies (and used to dodge cycles that are now
# broken instead); issue 21 allows ten at most, each saying why it is deferred.
FUNCTION_LEVEL_IMPORTS_MAX = 10


def test_import_linter_contracts():
    require_module("importlinter")
    # -c rather than the lint-imports script: the script sits next to the venv's python,
    # which need not be the interpreter running the tests.
    out = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()",
         "--no-cache"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout, out.stdout


def _function_level_imports(sources: Iterable[tuple[str, str]]) -> list[tuple[str, bool]]:
    """``(name:line, says_why)`` for every import statement inside a function body, for
    (name, source): ``says_why`` when a comment sits on its line or on the line above."""
    return [found for name, text in sources for found in _imports_in_functions(name, text)]


def _imports_in_functions(name: str, text: str) -> list[tuple[str, bool]]:
    lines: list[int] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function:
                lines.append(child.lineno)
            visit(child, in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(text, name), False)
    if not lines:  # most files: no need to tokenize (pure Python, most of this test's time)
        return []
    comments = {}  # line -> (comment, whether the line holds nothing else)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = (tok.string, not tok.line[:tok.start[1]].strip())

    def says_why(line: int) -> bool:
        own, above = comments.get(line), comments.get(line - 1)
        return (own is not None and not own[0].startswith(("# noqa", "# type:"))
                or above is not None and above[1])

    return [(f"{name}:{line}", says_why(line)) for line in lines]


def _package_sources() -> Iterator[tuple[str, str]]:
    for folder in SOURCE_FOLDERS:
        for py in sorted((ROOT / folder).rglob("*.py")):
            yield py.relative_to(ROOT).as_posix(), py.read_text()


@functools.cache
def _package_function_level_imports() -> tuple[tuple[str, bool], ...]:
    """The sources' function-level imports, found once for the tests that read them (the
    parse of every source is most of their time); sources do not change during a run."""
    return tuple(_function_level_imports(_package_sources()))


def test_function_level_imports_stay_under_the_ceiling():
    found = [where for where, _ in _package_function_level_imports()]
    assert len(found) <= FUNCTION_LEVEL_IMPORTS_MAX, "\n".join(found)


def test_each_function_level_import_says_why():
    unexplained = [where for where, why in _package_function_level_imports() if not why]
    assert not unexplained, "a comment on or just above each says why it is deferred:\n" + "\n".join(unexplained)


def test_the_count_takes_methods_and_nested_functions_once_each():
    """Module level, ``if TYPE_CHECKING`` included, does not count; a method's import and a
    nested function's count once each; a comment on the line or the line above says why
    (a bare noqa does not, nor does a comment at the end of the line above)."""
    src = ("import os\nif TYPE_CHECKING:\n    import sys\n"
           "class C:\n    def m(self):\n        import json  # lazy: json is slow\n"
           "        def inner():\n            x = 1  # not about the import\n"
           "            from math import pi\n"
           "            # the reason\n            import re\n"
           "            import abc  # noqa: F401\n")
    assert _function_level_imports([("m.py", src)]) == [
        ("m.py:6", True), ("m.py:9", False), ("m.py:11", True), ("m.py:12", False)]


def test_acyclic_modules_finds_each_cycle_at_module_granularity():
    """tools/import_contracts.py's cycle finder: a cycle through a subpackage's module counts,
    a package importing its own subpackage's module without a way back does not."""
    grimp = require_module("grimp")
    from tools.import_contracts import import_cycles

    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c", "p.sub", "p.sub.x", "p.sub.y", "p.d"):
        graph.add_module(module)
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.sub.x"), ("p.sub.x", "p.a"),
                               ("p.c", "p.sub.y"), ("p.sub.y", "p.d"), ("p.d", "p.d"),
                               ("p.sub.x", "p.sub.y")]:
        graph.add_import(importer=importer, imported=imported)
    assert import_cycles(graph, "p") == [["p.a", "p.b", "p.sub.x"]]
    graph.add_import(importer="p.d", imported="p.c")
    assert import_cycles(graph, "p") == [["p.a", "p.b", "p.sub.x"], ["p.c", "p.d", "p.sub.y"]]
