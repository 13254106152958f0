"""The pytest plugin: fixtures, isolation, cleanup, registration and its example."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys
from collections.abc import Callable

import pytest

from toolfs import Workspace

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "tests" / "examples" / "test_agent_example.py"


def test_registered_through_the_entry_point(pytestconfig: pytest.Config) -> None:
    plugin = pytestconfig.pluginmanager.get_plugin("toolfs")
    assert plugin is not None
    assert plugin.__name__ == "toolfs.integrations.pytest_plugin"


def test_workspace_has_a_unique_memory_root(toolfs_workspace: Workspace) -> None:
    assert re.fullmatch(r"memory://toolfs-test-[0-9a-f]{32}", toolfs_workspace.url)
    assert toolfs_workspace.fs.store.name == "memory"
    assert toolfs_workspace.execute("read", {"file_path": "a.txt"}).error.code == "not_found"


def test_factory_gives_other_contexts_on_the_same_root(
        toolfs_workspace: Workspace, toolfs_workspaces: Callable[..., Workspace]) -> None:
    toolfs_workspace.write("a.txt", "one\n")
    other = toolfs_workspaces()
    assert other.context_id != toolfs_workspace.context_id
    assert other.read("a.txt").lines == ["one"]  # same files
    blind = toolfs_workspaces().execute("write", {"file_path": "a.txt", "content": "two\n"})
    assert blind.error is not None and blind.error.code == "not_observed"  # own ledger
    reader = toolfs_workspaces(read_only=True, context_id="reviewer")
    assert reader.context_id == "reviewer"
    reader.read("a.txt")
    assert reader.execute("edit", {"file_path": "a.txt", "old_string": "one",
                                   "new_string": "1"}).error.code == "denied"


def _run_pytest(tmp_path: pathlib.Path, *files: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         *map(str, files)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)


def test_isolated_and_cleaned_up_in_a_fresh_pytest(tmp_path: pathlib.Path) -> None:
    # Two tests write the same path; the second must not see the first's file, and no
    # root may be left in the process-wide memory filesystem afterwards.
    (tmp_path / "test_iso.py").write_text(
        "from fsspec.implementations.memory import MemoryFileSystem\n"
        "def test_a(toolfs_workspace):\n"
        "    toolfs_workspace.write('x.txt', 'a\\n')\n"
        "def test_b(toolfs_workspace):\n"
        "    assert toolfs_workspace.execute('read', {'file_path': 'x.txt'}).error.code"
        " == 'not_found'\n"
        "def test_c_nothing_left():\n"
        "    assert not [p for p in MemoryFileSystem.store if 'toolfs-test-' in p]\n"
        "    assert not [p for p in MemoryFileSystem.pseudo_dirs if 'toolfs-test-' in p]\n")
    done = _run_pytest(tmp_path, tmp_path / "test_iso.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


def test_the_documented_example_passes_in_a_fresh_pytest(tmp_path: pathlib.Path) -> None:
    copy = shutil.copy(EXAMPLE, tmp_path / "test_agent_example.py")
    done = _run_pytest(tmp_path, pathlib.Path(copy))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_the_docs_show_the_example_verbatim() -> None:
    doc = (ROOT / "docs" / "pytest.md").read_text()
    assert f"```python\n{EXAMPLE.read_text()}```" in doc


def test_the_plugin_does_not_import_mcp() -> None:
    code = ("import sys, toolfs.integrations.pytest_plugin as p; "
            "print(sorted(m for m in ('mcp', 'uvicorn', 'starlette') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]"
