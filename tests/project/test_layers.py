"""The package map of docs/architecture.md, enforced: no import circles between modules,
and no import from a lower layer to a higher one.

The graph is read statically (AST over src/toolfs), so an import that only runs in a
notebook, in one branch or under ``TYPE_CHECKING`` counts as much as a top-level one.
``from toolfs import Workspace`` counts as importing the module the name comes from
(``toolfs.__init__``'s lazy table); the package root itself is the face that re-exports
everything, and is outside the layers.
"""

from __future__ import annotations

import ast
import pathlib
import re
from collections.abc import Iterator

import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "toolfs"
ARCHITECTURE = SRC.parent / "docs" / "architecture.md"

LAYERS: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    # (package as docs/architecture.md names it, level, module prefixes)
    ("contract", 0, ("toolfs.errors", "toolfs.escaping", "toolfs._trusted", "toolfs.redact",
                     "toolfs.versions", "toolfs.deadline", "toolfs.results",
                     "toolfs.schemas")),
    ("testing", 0, ("toolfs.testing",)),
    ("formats", 1, ("toolfs.formats",)),
    ("render", 2, ("toolfs.render",)),
    ("backends", 2, ("toolfs.backends",)),
    ("policy", 3, ("toolfs.policy",)),
    ("search", 4, ("toolfs.search",)),
    ("tools", 5, ("toolfs.tools",)),
    ("undo", 6, ("toolfs.undo",)),
    ("workspace", 7, ("toolfs.workspace",)),
    ("integrations", 8, ("toolfs.integrations",)),
    ("server", 9, ("toolfs.server",)),
    ("entry point", 10, ("toolfs.__main__",)),
)
"""A module may import modules of its own package and of packages on lower levels only."""

ROOT = "toolfs"


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, pathlib.Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _literal(name: str) -> object:
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    for node in ast.walk(tree):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == name and node.value is not None):
            return ast.literal_eval(node.value)
    raise AssertionError(f"toolfs/__init__.py has no {name} table")


def _exports() -> dict[str, str]:
    """``toolfs.__getattr__``'s table: ``from toolfs import Workspace`` imports
    toolfs.workspace."""
    value = _literal("_EXPORTS")
    assert isinstance(value, dict)
    return value


def _moved() -> dict[str, str]:
    """Old module paths and the modules they are now (``toolfs._MOVED``)."""
    value = _literal("_MOVED")
    assert isinstance(value, dict)
    return value


def imports_of(name: str, path: pathlib.Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every import of a toolfs module anywhere in the file, relative
    ones resolved, old paths mapped to the moved module, plus
    ``importlib.import_module("...")`` calls with a literal name."""
    known, exports, moved = modules(), _exports(), _moved()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def resolved(module: str) -> str:
        return moved.get(module, module)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, resolved(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            base = resolved(base)
            names_a_module = False
            for alias in node.names:  # `from toolfs import tools` imports a module
                sub = resolved(f"{base}.{alias.name}")
                if sub in known:
                    names_a_module = True
                    yield node.lineno, sub
                elif base == ROOT and alias.name in exports:
                    names_a_module = True
                    yield node.lineno, exports[alias.name]
            if not names_a_module and base != ROOT:
                yield node.lineno, base
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name)
              and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
              in ("import_module", "__import__")
              and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            yield node.lineno, resolved(node.args[0].value)


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def layer_of(module: str) -> tuple[str, int] | None:
    for package, level, prefixes in LAYERS:
        if _within(module, prefixes):
            return package, level
    return None


def graph() -> dict[str, set[str]]:
    """Module -> the toolfs modules it imports (the package root left out: the face)."""
    known = modules()
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        if name == ROOT:
            continue
        edges[name] = {target for _, target in imports_of(name, path)
                       if target in known and target not in (name, ROOT)}
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def upward_imports() -> list[str]:
    """Every import that points up the layers (or sideways into another package of the
    same level), as ``file:line imports module``."""
    bad = []
    for name, path in modules().items():
        if name == ROOT:
            continue
        mine = layer_of(name)
        assert mine is not None, f"{name} is in no layer of docs/architecture.md"
        for line, target in imports_of(name, path):
            theirs = layer_of(target)
            if theirs is None or theirs[0] == mine[0]:
                continue
            if theirs[1] >= mine[1]:
                bad.append(f"{path.relative_to(SRC)}:{line} ({mine[0]}) imports "
                           f"{target} ({theirs[0]})")
    return bad


def test_the_scan_sees_every_kind_of_import(tmp_path: pathlib.Path) -> None:
    # The checker itself: lazy, relative, aliased, type-checking, dynamic and old paths.
    source = '''
import typing
if typing.TYPE_CHECKING:
    from toolfs.workspace import Workspace
def f():
    from ..integrations import display
    from .. import integrations
    from toolfs import Workspace as W
    import importlib; importlib.import_module("toolfs.integrations.cli")
    import toolfs.text
'''
    fake = tmp_path / "events.py"
    fake.write_text(source)
    found = [m for _, m in imports_of("toolfs.policy.events", fake)]
    for expected in ("toolfs.workspace", "toolfs.integrations.display", "toolfs.integrations",
                     "toolfs.integrations.cli", "toolfs.formats.text"):
        assert expected in found, (expected, found)


def test_the_circle_finder_finds_circles() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": {"e"}}
    assert sorted(circles(edges)) == [["a", "b", "c"], ["e", "e2"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles() -> None:
    assert circles(graph()) == []


def test_every_module_is_in_a_layer() -> None:
    assert [m for m in modules() if m != ROOT and layer_of(m) is None] == []


def test_no_import_points_up_the_layers() -> None:
    assert upward_imports() == []


def test_the_map_in_the_docs_matches_the_layers() -> None:
    # docs/architecture.md's table lists each package with its level, as LAYERS does.
    text = ARCHITECTURE.read_text()
    rows = dict(re.findall(r"^\|\s*`?([a-z ]+?)`?\s*\|\s*(\d+)\s*\|", text, re.M))
    assert {package: str(level) for package, level, _ in LAYERS} == rows


def test_the_package_root_keeps_few_modules() -> None:
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= 12, loose


@pytest.mark.parametrize("old, new", sorted(_moved().items()))
def test_old_module_paths_still_import(old: str, new: str) -> None:
    import importlib

    assert importlib.import_module(old) is importlib.import_module(new)


def test_display_is_imported_only_by_the_package_top() -> None:
    # toolfs/__init__.py registers the notebook views; the core never imports them.
    users = sorted({name for name, path in modules().items()
                    for _, target in imports_of(name, path)
                    if _within(target, ("toolfs.integrations.display",))
                    and name != "toolfs.integrations.display"})
    assert set(users) <= {"toolfs"}, users
