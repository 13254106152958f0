"""The pytest plugin: fixtures, isolation, cleanup, registration and its example."""

from __future__ import annotations

import importlib
import pathlib
import re
import shutil
import subprocess
import sys
from collections.abc import Callable

import pytest

from toolfs import Workspace
from toolfs.integrations.pytest_plugin import BACKENDS

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "examples" / "test_agent_example.py"
EVERY_BACKEND = ROOT / "tests" / "examples" / "test_agent_on_every_backend.py"


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


def _run_pytest(tmp_path: pathlib.Path, *files: pathlib.Path,
                args: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         *args, *map(str, files)],
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


def test_the_docs_show_the_examples_verbatim() -> None:
    doc = (ROOT / "docs" / "pytest.md").read_text()
    assert f"```python\n{EXAMPLE.read_text()}```" in doc
    assert f"```python\n{EVERY_BACKEND.read_text()}```" in doc


def test_the_every_backend_example_runs_on_each_backend(tmp_path: pathlib.Path) -> None:
    copy = shutil.copy(EVERY_BACKEND, tmp_path / "test_every_backend.py")
    done = _run_pytest(tmp_path, pathlib.Path(copy), args=("-rA",))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "10 passed" in done.stdout, done.stdout
    for name in BACKENDS:
        assert f"PASSED test_every_backend.py::test_agent_fixes_the_todos[{name}]" in \
            done.stdout, done.stdout


PROBE = (
    "import pytest\n"
    "def test_probe(toolfs_workspace, toolfs_backend):\n"
    "    toolfs_workspace.write('a.txt', 'x\\n')\n"
    "    print('BACKEND', toolfs_backend, toolfs_workspace.fs.store.name,"
    " toolfs_workspace.url)\n"
    "def test_twice(toolfs_workspace):\n"
    "    assert toolfs_workspace.execute('read', {'file_path': 'a.txt'}).error.code =="
    " 'not_found'\n")


def test_option_parametrises_unmarked_tests_with_fresh_roots(tmp_path: pathlib.Path) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE)
    done = _run_pytest(tmp_path, tmp_path / "test_probe.py",
                       args=("-s", "-rA", "--toolfs-backend=local", "--toolfs-backend",
                             "s3,memory"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 passed" in done.stdout, done.stdout
    lines = sorted(line.split("BACKEND ", 1)[1].split()[:2]
                   for line in done.stdout.splitlines() if "BACKEND " in line)
    assert lines == [["local", "local"], ["memory", "memory"], ["s3", "s3"]]
    for name in ("local", "s3", "memory"):
        assert f"test_probe.py::test_twice[{name}]" in done.stdout


def test_a_marker_takes_precedence_over_the_option(tmp_path: pathlib.Path) -> None:
    (tmp_path / "test_marked.py").write_text(
        "import pytest\n"
        "@pytest.mark.toolfs_backends('local')\n"
        "def test_m(toolfs_workspace, toolfs_backend):\n"
        "    assert toolfs_backend == 'local'\n"
        "    assert toolfs_workspace.fs.store.name == 'local'\n"
        "def test_default(toolfs_workspace):\n"
        "    assert toolfs_workspace.fs.store.name == 'memory'\n")
    done = _run_pytest(tmp_path, tmp_path / "test_marked.py", args=("-rA",))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_marked.py::test_m[local]" in done.stdout
    assert "test_marked.py::test_default PASSED" in done.stdout or \
        "PASSED test_marked.py::test_default\n" in done.stdout, done.stdout


def test_a_missing_extra_skips_with_what_to_install(tmp_path: pathlib.Path) -> None:
    (tmp_path / "conftest.py").write_text(
        "import sys\n"
        "sys.modules['moto'] = None  # as if moto were not installed\n")
    (tmp_path / "test_probe.py").write_text(PROBE)
    done = _run_pytest(tmp_path, tmp_path / "test_probe.py",
                       args=("-rs", "--toolfs-backend=s3,memory"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed, 2 skipped" in done.stdout, done.stdout
    assert "toolfs_workspace[s3] needs moto: install toolfs[test]" in done.stdout


def test_unknown_backend_names_are_usage_errors(tmp_path: pathlib.Path) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE)
    done = _run_pytest(tmp_path, tmp_path / "test_probe.py", args=("--toolfs-backend=s4",))
    assert done.returncode == 4, done.stdout + done.stderr
    assert "unknown toolfs backend 's4'; known: memory, local, s3, gcs, azure, all" in done.stderr
    (tmp_path / "test_marked.py").write_text(
        "import pytest\n"
        "@pytest.mark.toolfs_backends('memory', 'ftp')\n"
        "def test_m(toolfs_workspace):\n"
        "    pass\n")
    done = _run_pytest(tmp_path, tmp_path / "test_marked.py")
    assert done.returncode != 0
    assert "unknown toolfs backend 'ftp'" in done.stdout + done.stderr


def test_the_registry_is_the_documented_backends() -> None:
    # One entry per backend; "all" runs them in this order.
    assert list(BACKENDS) == ["memory", "local", "s3", "gcs", "azure"]
    for backend in BACKENDS.values():
        assert (backend.emulator is None) == (backend.name in ("memory", "local"))
        if backend.emulator:
            module, _, cls = backend.emulator.partition(":")
            emulator = getattr(importlib.import_module(module), cls)
            assert callable(getattr(emulator, backend.filesystem))
            assert callable(emulator.create_bucket)


def test_the_plugin_does_not_import_mcp() -> None:
    code = ("import sys, toolfs.integrations.pytest_plugin as p; "
            "print(sorted(m for m in ('mcp', 'uvicorn', 'starlette') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]"


def test_a_missing_program_skips_with_its_reason(tmp_path: pathlib.Path) -> None:
    """Azure's emulator needs Node.js and npm besides the extra: without them (here the
    check is made to say so), its tests skip with that reason instead of erroring."""
    (tmp_path / "conftest.py").write_text(
        "import toolfs.testing.azurite as azurite\n"
        "azurite.azurite_unavailable = lambda: 'Azurite needs Node.js and npm on PATH'\n")
    (tmp_path / "test_probe.py").write_text(PROBE)
    done = _run_pytest(tmp_path, tmp_path / "test_probe.py",
                       args=("-rs", "--toolfs-backend=azure,memory"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed, 2 skipped" in done.stdout, done.stdout
    assert "toolfs_workspace[azure]: Azurite needs Node.js and npm on PATH" in done.stdout
