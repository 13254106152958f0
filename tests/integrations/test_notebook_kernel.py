"""docs/notebook.ipynb runs end to end in a real kernel (nbclient), on memory and on S3."""

from __future__ import annotations

import importlib.util
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "docs" / "notebook.ipynb"
HAS_S3_ADAPTER = importlib.util.find_spec("toolfs.backends.s3") is not None


def execute(tmp_path: pathlib.Path) -> Any:
    """Run every cell in a fresh python3 kernel; raises on the first error cell."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                                     record_timing=False,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    return nb


def outputs(nb: Any) -> list[list[tuple[str, str]]]:
    """Per code cell: (output type, text shown) pairs, ignoring execution counts."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        shown = []
        for out in cell.outputs:
            assert out.output_type != "error", out
            data = out.get("data", {})
            shown.append((out.output_type, out.get("text") or data.get("text/markdown")
                          or data.get("text/plain", "")))
        cells.append(shown)
    return cells


def check_story(cells: list[list[tuple[str, str]]], storage: str) -> None:
    text = "\n".join(body for cell in cells for _, body in cell)
    assert f"storage: {storage}" in text
    assert "**error `stale`** `daily_sales.yaml`" in text  # the refusal, as Markdown
    assert "Error [stale]: daily_sales.yaml changed" in text  # what the model reads
    assert "schedule: '0 7 * * *'\nsource: s3://raw/sales/v2/\nretries: 3\n" in text
    audit = next(body for cell in cells for _, body in cell if body.startswith("| type |"))
    assert "| fs/denied | agent | edit | daily_sales.yaml |" in audit
    assert "| fs/written | teammate | edit | daily_sales.yaml |" in audit


@pytest.fixture
def no_s3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLFS_S3_ENDPOINT", raising=False)


@pytest.mark.usefixtures("no_s3")
def test_notebook_on_memory_matches_its_saved_outputs(tmp_path: pathlib.Path) -> None:
    ran = outputs(execute(tmp_path))
    check_story(ran, "memory")
    # The outputs saved in docs/ are what the code produces today.
    assert ran == outputs(nbformat.read(NOTEBOOK, as_version=4))


@pytest.fixture
def s3_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from toolfs.testing.emulators import S3Emulator

    with S3Emulator() as s3:  # no bucket: the notebook's first cell creates it
        monkeypatch.setenv("TOOLFS_S3_ENDPOINT", s3.endpoint_url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        yield s3.endpoint_url


@pytest.mark.skipif(not HAS_S3_ADAPTER, reason="the S3 adapter (toolfs.backends.s3) is not "
                    "there yet")
def test_notebook_on_the_s3_emulator(tmp_path: pathlib.Path, s3_endpoint: str) -> None:
    ran = outputs(execute(tmp_path))
    check_story(ran, "S3")
    assert "version `etag:" in "\n".join(body for cell in ran for _, body in cell)


# -- hostile names in a real kernel ---------------------------------------------------

HOSTILE_CELLS = [
    "import toolfs\n"
    "names = ['<img src=x onerror=alert(1)>.md', 'a`b``c.md', 'p|i|pe.md', 'new\\nline.md',\n"
    "         '*star* _under_.md', '[x](javascript:alert(1)).md', '<script>alert(1)</script>']\n"
    "ws = toolfs.Workspace('memory://toolfs-notebook-hostile', context_id='<b>ctx</b>')\n"
    "results = [ws.write(n, 'one\\n') for n in names]",
    "results[0]",
    "ws.read(names[1])",
    "ws.edit(names[2], 'one', 'two')",
    "ws.new_context().execute('write', {'file_path': names[0], 'content': 'x'})",
    "toolfs.FsError('denied', 'vetoed: ' + names[6], names[5])",
    "ws.audit",
    "ws.audit.events[-1]",
    "ws",
]


def test_hostile_names_display_as_text_in_a_kernel(tmp_path: pathlib.Path) -> None:
    from tests.integrations.test_display import check_html, check_markdown

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in HOSTILE_CELLS])
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=120, record_timing=False,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = [out for cell in nb.cells for out in cell.outputs]
    assert all(out.output_type == "execute_result" for out in shown), shown
    assert len(shown) == len(HOSTILE_CELLS) - 1
    for out in shown:  # `import toolfs` alone registered both views
        check_markdown(out.data["text/markdown"])
        check_html(out.data["text/html"])
        assert "<img" not in out.data["text/html"] and "<script" not in out.data["text/html"]
    assert "&lt;img src=x onerror=alert(1)&gt;.md" in shown[0].data["text/html"]

    # The export that went wrong (nbconvert comes with the test extra).
    from nbconvert import HTMLExporter

    page, _ = HTMLExporter(template_name="basic").from_notebook_node(nb)
    assert "<img src=x" not in page and "<script>alert(1)" not in page
    assert "<b>ctx</b>" not in page
