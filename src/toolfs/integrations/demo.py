"""``toolfs demo``: two agents edit one file; toolfs refuses the edit made from a stale copy.

The story is played through :meth:`toolfs.Workspace.execute`, the path a model's tool call
takes, and prints exactly the text each agent (model) would see.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TextIO

from toolfs.errors import install_hint
from toolfs.policy.events import AuditLog
from toolfs.workspace import Workspace

Backend = Literal["memory", "local", "s3"]
BACKENDS: tuple[Backend, ...] = ("memory", "local", "s3")

FILE = "config.toml"
START = "[service]\nretries = 3\ntimeout = 30\n"


@dataclass(frozen=True)
class DemoOutcome:
    """What happened, for callers and tests."""

    applied: int
    """Edits committed."""
    refused: int
    """Edits refused as stale."""
    final: str
    """The file's content at the end."""


@dataclass(frozen=True)
class _Root:
    url: str
    storage_options: Mapping[str, Any] | None
    label: str


def run_demo(backend: Backend = "memory", out: TextIO | None = None) -> DemoOutcome:
    """Play the story on ``backend`` and print it to ``out`` (default: stdout)."""
    stream = out or sys.stdout
    with _root(backend) as root:
        return _story(root, stream)


def _story(root: _Root, out: TextIO) -> DemoOutcome:
    log = AuditLog()  # one log for both agents: the platform's view of what happened
    setup = Workspace(root.url, root.storage_options, context_id="setup")
    setup.write(FILE, START)
    a = setup.new_context(context_id="agent-a", subscribers=[log])
    b = setup.new_context(context_id="agent-b", subscribers=[log])

    def say(text: str = "") -> None:
        print(text, file=out)

    def step(n: int, agent: str, ws: Workspace, what: str, tool: str,
             args: dict[str, Any]) -> bool:
        say(f"{n}. Agent {agent} {what}")
        output = ws.execute(tool, args)
        say(f"   {agent} sees:")
        say(textwrap.indent(output.text, "   | "))
        say()
        return not output.is_error

    def edit(old: str, new: str) -> dict[str, Any]:
        return {"file_path": FILE, "old_string": old, "new_string": new}

    read = {"file_path": FILE}

    say(f"toolfs demo: two agents share one file on {root.label}.")
    say("Each agent is its own execution context: toolfs remembers the version of every")
    say("file an agent has read, and refuses a change made from an out-of-date copy.")
    say()
    say(f"{FILE} starts as:")
    say(textwrap.indent(START.rstrip("\n"), "    "))
    say()
    step(1, "A", a, f"reads {FILE}", "read", read)
    step(2, "B", b, f"reads {FILE}", "read", read)
    step(3, "A", a, 'raises the timeout: "timeout = 30" -> "timeout = 60"', "edit",
         edit("timeout = 30", "timeout = 60"))
    stale_ok = step(4, "B", b, 'raises the retries, working from its copy of step 2: '
                    '"retries = 3" -> "retries = 5"', "edit", edit("retries = 3", "retries = 5"))
    if not stale_ok:
        say("   Refused. Applied to B's copy from step 2, this edit would have written")
        say("   \"timeout = 30\" back and silently undone A's change: a lost update.")
        say("   The refusal shows B everything that changed since its read, so B need")
        say("   not read the file again.")
        say()
    step(5, "B", b, "redoes its edit, without reading again", "edit",
         edit("retries = 3", "retries = 5"))

    final = setup.fs.cat_file(FILE).decode()
    applied = sum(e.type == "fs/written" for e in log.events)
    refused = sum(e.type == "fs/denied" and (e.reason or "").startswith("stale")
                  for e in log.events)
    both = "retries = 5" in final and "timeout = 60" in final
    say(f"{FILE} now:")
    say(textwrap.indent(final.rstrip("\n"), "    "))
    say()
    say(f"Summary: {applied + refused} edits attempted, {applied} applied, {refused} refused "
        f"as stale, {'no' if both else 'an'} update lost.")
    if both:
        say("Both agents' changes are in the file; the refused one cost B one more call.")
    return DemoOutcome(applied=applied, refused=refused, final=final)


@contextlib.contextmanager
def _root(backend: Backend) -> Iterator[_Root]:
    """A fresh, empty root on ``backend``, removed afterwards."""
    if backend == "memory":
        name = f"toolfs-demo-{uuid.uuid4().hex[:8]}"
        try:
            yield _Root(f"memory://{name}", None, "in-memory storage (embedded)")
        finally:
            from fsspec.implementations.memory import MemoryFileSystem

            fs = MemoryFileSystem()
            if fs.exists(f"/{name}"):
                fs.rm(f"/{name}", recursive=True)
    elif backend == "local":
        with tempfile.TemporaryDirectory(prefix="toolfs-demo-") as tmp:
            yield _Root(tmp, None, "a local directory (temporary)")
    elif backend == "s3":
        missing = [m for m in ("moto", "s3fs") if importlib.util.find_spec(m) is None]
        if missing:
            raise RuntimeError(f"--backend s3 needs {' and '.join(missing)} to run a local S3 "
                               f"emulator: {install_hint('test')}")
        from toolfs.testing.emulators import S3Emulator

        with S3Emulator() as s3:
            s3.create_bucket("toolfs-demo")
            yield _Root("s3://toolfs-demo/project", s3.s3fs_storage_options(),
                        "S3 (a local emulator)")
    else:
        raise ValueError(f"unknown backend {backend!r}; use one of {', '.join(BACKENDS)}")
