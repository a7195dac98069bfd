"""import-linter contract types of rill's own (pyproject.toml's ``contract_types``).

``acyclic_modules``: no import cycle among the modules of a package, at module granularity.
import-linter's ``acyclic_siblings`` squashes each subpackage into one node, which would count
``server.acl -> server.commands.table`` and ``server.commands.acl -> server.acl`` as a cycle
although no module is on one; this contract looks at modules, not packages. Imports inside
functions count (they are dependencies all the same); ``if TYPE_CHECKING`` ones do not when
the session excludes them (``exclude_type_checking_imports``).
"""

from __future__ import annotations

import grimp
from importlinter.application import contract_utils, output
from importlinter.application.contract_utils import AlertLevel
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


def import_cycles(graph: grimp.ImportGraph, package: str) -> list[list[str]]:
    """The strongly connected components (of two or more modules) among ``package``'s
    modules, each sorted, in a stable order."""
    modules = sorted(graph.find_descendants(package) | {package})
    inside = set(modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & inside) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        # Tarjan's algorithm, iteratively: (module, position in its edge list).
        work = [(root, 0)]
        while work:
            module, i = work.pop()
            if i == 0:
                index[module] = low[module] = len(index)
                stack.append(module)
                on_stack.add(module)
            targets = edges[module]
            while i < len(targets) and targets[i] in index:
                if targets[i] in on_stack:
                    low[module] = min(low[module], index[targets[i]])
                i += 1
            if i < len(targets):
                work.append((module, i + 1))
                work.append((targets[i], 0))
                continue
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
    return sorted(found)


class AcyclicModulesContract(Contract):
    """No module of the given packages reaches itself through imports."""

    type_name = "acyclic_modules"

    packages = fields.ListField(subfield=fields.ModuleField())
    # Imports still on a cycle while it is being taken apart; each must match an import.
    ignore_imports = fields.SetField(subfield=fields.ImportExpressionField(), required=False)
    unmatched_ignore_imports_alerting = fields.EnumField(AlertLevel, default=AlertLevel.ERROR)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        removal = contract_utils.remove_ignored_imports_and_report(
            graph=graph, ignore_imports=self.ignore_imports,  # type: ignore[attr-defined]
            unmatched_alerting=self.unmatched_ignore_imports_alerting)  # type: ignore[attr-defined]
        cycles = []
        for package in self.packages:  # type: ignore[attr-defined]
            for component in import_cycles(graph, package.name):
                cycles.append([(a, b, graph.get_import_details(importer=a, imported=b))
                               for a in component for b in component
                               if graph.direct_import_exists(importer=a, imported=b)])
        return ContractCheck(kept=not cycles, warnings=list(removal.warnings),
                             ignored_import_count=removal.ignored_import_count,
                             metadata={"cycles": cycles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for imports in check.metadata["cycles"]:
            modules = sorted({a for a, _, _ in imports})
            output.print_error(f"{len(modules)} modules import each other in a cycle:")
            output.new_line()
            for importer, imported, details in imports:
                lines = ", ".join(f"l.{d['line_number']}" for d in details)
                output.indent_cursor()
                output.print(f"- {importer} -> {imported} ({lines})")
            output.new_line()
