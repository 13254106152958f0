"""Dependencies point down: the core never imports the notebook display, the workspace or
the integrations, not even lazily inside a function or for type checking.

The graph is read statically (AST over src/toolfs), so an import that only runs in a
notebook, in one branch or under ``TYPE_CHECKING`` counts as much as a top-level one.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator

import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "toolfs"

CORE = ("toolfs.errors", "toolfs.results", "toolfs.render", "toolfs.text", "toolfs.versions",
        "toolfs.escaping", "toolfs.redact", "toolfs.v4a", "toolfs.schemas", "toolfs.tools",
        "toolfs.tools_discovery", "toolfs.discovery",
        "toolfs.backends", "toolfs.policy")
ABOVE_THE_CORE = ("toolfs.display", "toolfs.workspace", "toolfs.integrations", "toolfs.undo")


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, pathlib.Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _exports() -> dict[str, str]:
    """``toolfs.__getattr__``'s table: ``from toolfs import Workspace`` imports
    toolfs.workspace."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    for node in ast.walk(tree):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == "_EXPORTS" and node.value is not None):
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return value
    raise AssertionError("toolfs/__init__.py has no _EXPORTS table")


def imports_of(name: str, path: pathlib.Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every import anywhere in the file, relative ones resolved, plus
    ``importlib.import_module("...")`` calls with a literal name."""
    known = modules()
    exports = _exports()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            yield node.lineno, base
            for alias in node.names:  # `from toolfs import display` imports a module
                sub = f"{base}.{alias.name}"
                if sub in known:
                    yield node.lineno, sub
                elif base == "toolfs" and alias.name in exports:
                    yield node.lineno, exports[alias.name]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name)
              and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
              in ("import_module", "__import__")
              and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            yield node.lineno, node.args[0].value


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_scan_sees_every_kind_of_import(tmp_path: pathlib.Path) -> None:
    # The checker itself: lazy, relative, aliased, type-checking and dynamic imports.
    source = '''
import typing
if typing.TYPE_CHECKING:
    from toolfs.workspace import Workspace
def f():
    from ..display import markdown
    from .. import integrations
    from toolfs import Workspace as W
    import importlib; importlib.import_module("toolfs.integrations.cli")
'''
    fake = tmp_path / "events.py"
    fake.write_text(source)
    found = [m for _, m in imports_of("toolfs.policy.events", fake)]
    for expected in ("toolfs.workspace", "toolfs.display", "toolfs.integrations",
                     "toolfs.integrations.cli"):
        assert expected in found, (expected, found)


CORE_MODULES = sorted(name for name in modules() if _within(name, CORE))


def test_the_core_list_matches_the_tree() -> None:
    assert {"toolfs.errors", "toolfs.results", "toolfs.policy.events",
            "toolfs.backends.base"} <= set(CORE_MODULES)
    assert not [m for m in CORE_MODULES if _within(m, ABOVE_THE_CORE)]


@pytest.mark.parametrize("name", CORE_MODULES)
def test_core_module_imports_nothing_above_the_core(name: str) -> None:
    path = modules()[name]
    bad = [f"{path.relative_to(SRC)}:{line} imports {target}"
           for line, target in imports_of(name, path) if _within(target, ABOVE_THE_CORE)]
    assert not bad, "\n".join(bad)


def test_display_is_imported_only_by_the_package_top() -> None:
    # toolfs/__init__.py registers the notebook views; toolfs.workspace still has its own
    # _repr_markdown_ hook (outside this check's owner's files), which the registered
    # formatter supersedes.
    users = sorted({name for name, path in modules().items()
                    for _, target in imports_of(name, path)
                    if _within(target, ("toolfs.display",)) and name != "toolfs.display"})
    assert set(users) <= {"toolfs", "toolfs.workspace"}, users
