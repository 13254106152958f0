"""OpenAI's ``apply_patch`` tool, stored by toolfs (extra ``openai``).

GPT-5-class models edit files with ``apply_patch``: each call is one operation,
``create_file``, ``update_file`` (a V4A diff, optionally ``move_to``) or ``delete_file``.
The developer applies it. Here it lands on a :class:`toolfs.Workspace`, on any backend,
with the same policy as ``edit``:

* ``ApplyPatchEditor(ws)``: the Agents SDK's ``ApplyPatchEditor`` protocol, for
  ``ApplyPatchTool(editor=ApplyPatchEditor(ws))``; ``AsyncApplyPatchEditor(aws)`` for an
  :class:`toolfs.AsyncWorkspace` (the SDK awaits what the editor returns).
* ``apply_patch(ws, operation)`` for a raw Responses API ``apply_patch_call`` (its
  ``operation``, or the call item itself), returning a :class:`toolfs.ToolOutput`;
  :func:`apply_patch_call_output` builds the ``apply_patch_call_output`` input item.

Rules (see docs/integrations.md):

* **update_file** applies the diff (:mod:`toolfs.integrations.v4a`: exact context, every
  hunk located uniquely) to the bytes this context observed, and commits them through that same
  :class:`~toolfs.policy.filesystem.ObservedFile`: the write lands only on the version the
  diff was applied to, so a change made since gives ``stale``, never a lost update. All
  hunks are applied in memory and stored in one conditional write; a diff that does not
  apply stores nothing. By default the file must have been read in this context, as for
  ``edit`` (``not_observed`` otherwise). ``require_read=False`` lets a patch's own read be
  the observation, for agents that read files through another channel (a shell): the
  file is read through the policy at patch time (an ``fs/read`` event, deny rules), the
  context lines must match those bytes exactly, and the write is conditional on them.
  A file read earlier in the context is always patched on the version read then.
* ``move_to`` is a conditional rename: the patched bytes are created at the destination
  (create-only: an existing destination is refused), then the source is deleted only if
  it is still at the version the bytes came from; if that fails, the new copy is deleted
  again, on the version just created (never a file someone else wrote since).
* **create_file** is create-only (as the Agents SDK's own editor): an existing file is
  refused; change it with ``update_file``. The text is the ``+`` lines, joined as the SDK
  joins them (no final newline unless the diff ends with an empty ``+`` line).
* **delete_file** is conditional on the version this context observed
  (``PolicyFileSystem.rm_file``): ``not_observed`` if never read, ``stale`` if changed.

Result texts are the Agents SDK's (``Created x``, ``Updated x``, ``Deleted x``,
``Updated x\\nMoved x to y``); errors are toolfs's (``Error [code] (path): message`` and
what to do next).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

from toolfs.errors import FsError, fs_error, missing_extra
from toolfs.formats.notebook import NotANotebook, Notebook, is_notebook_path, validate_notebook_text
from toolfs.formats.notebook import parse as parse_notebook
from toolfs.formats.text import decode
from toolfs.integrations.v4a import (
    Hunk,
    PatchOutcome,
    apply_update,
    parse_create,
    parse_patch,
    parse_update,
)
from toolfs.policy.filesystem import ObservedFile, PolicyFileSystem
from toolfs.policy.paths import Target
from toolfs.policy.recorder import move_scope
from toolfs.render import MAX_OUTPUT_CHARS, ToolOutput, bound_text, render_output
from toolfs.results import PatchResult
from toolfs.tools import notebook as notebook_tools
from toolfs.undo.atomic import Planned, commit_all
from toolfs.versions import FileVersion
from toolfs.workspace import AsyncWorkspace, Workspace

if TYPE_CHECKING:
    from agents.editor import ApplyPatchResult

__all__ = ["ApplyPatchEditor", "AsyncApplyPatchEditor", "PatchOperation", "PatchReport",
           "apply_batch", "apply_patch", "apply_patch_async", "apply_patch_call_output",
           "apply_patch_text",
           "function_call_output", "handle_apply_patch_call", "handle_function_call",
           "run_operation"]

OperationType = Literal["create_file", "update_file", "delete_file"]
_TYPES: tuple[OperationType, ...] = ("create_file", "update_file", "delete_file")
_FIELDS = ("type", "path", "diff", "move_to")


@dataclass(frozen=True)
class PatchOperation:
    """One apply_patch operation, validated."""

    type: OperationType
    path: str
    diff: str | None = None
    move_to: str | None = None

    @classmethod
    def of(cls, value: Any) -> PatchOperation:
        """From a Responses API operation (dict or the openai SDK's model), the Agents
        SDK's ``ApplyPatchOperation``, or a whole ``apply_patch_call`` item (its
        ``operation`` is taken); ``invalid_arguments`` for anything else."""
        fields = _fields(value)
        if fields.get("type") == "apply_patch_call" and "operation" in fields:
            fields = _fields(fields["operation"])
        unknown = [k for k in fields if k not in _FIELDS]
        if unknown:
            raise _invalid(f"unknown operation field {str(unknown[0])[:50]!r} (the fields "
                           f"are {', '.join(_FIELDS)})")
        kind = fields.get("type")
        if kind not in _TYPES:
            raise _invalid(f"operation type must be one of {', '.join(_TYPES)}, not "
                           f"{str(kind)[:50]!r}")
        path = fields.get("path")
        if not isinstance(path, str) or not path.strip():
            raise _invalid("operation path must be a non-empty string")
        diff = fields.get("diff")
        if kind == "delete_file":
            diff = None  # a delete carries no diff; one sent anyway changes nothing
        elif not isinstance(diff, str):
            raise _invalid(f"a {kind} operation needs its diff (a string)", path)
        move_to = fields.get("move_to")
        if move_to is not None:
            if kind != "update_file":
                raise _invalid(f"move_to applies to update_file only, not {kind}", path)
            if not isinstance(move_to, str) or not move_to.strip():
                raise _invalid("move_to must be a non-empty string", path)
        return cls(type=kind, path=path, diff=diff, move_to=move_to)


def _fields(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # the openai SDK's pydantic models
        return {k: v for k, v in dump(exclude_none=True).items()}
    if all(hasattr(value, name) for name in ("type", "path")):  # agents' ApplyPatchOperation
        return {name: getattr(value, name) for name in _FIELDS
                if getattr(value, name, None) is not None}
    raise _invalid(f"an apply_patch operation must be an object, not {type(value).__name__}")


def _invalid(message: str, path: str | None = None) -> FsError:
    # Not about the diff's hunks: the advice describes an operation.
    return fs_error("invalid_arguments", message, path=path,
                    details={"operation": "apply_patch_operation"})


def _exists(display: str, what: Literal["create_file", "move_to"]) -> FsError:
    if what == "create_file":
        message = (f"apply_patch cannot create {display} because it already exists. Use an "
                   "update_file operation to change an existing file.")
    else:
        message = (f"cannot move to {display}: it already exists, and a move never replaces "
                   "a file; choose another move_to, or delete that file first.")
    return fs_error("invalid_arguments", message, path=display,
                    details={"operation": what, "exists": True})


# -- the operations over the policy filesystem -----------------------------------------


def _open_for_patch(fs: PolicyFileSystem, path: str, require_read: bool) -> ObservedFile:
    """The bytes the diff applies to, and the handle that commits on their version."""
    if not require_read and fs.policy is not None:
        target = fs.resolve(path)
        if fs.ledger.get(target.backend_path) is None:
            # Never observed: the patch's own read is the observation (recorded, through
            # the policy), and its context lines must match these bytes exactly.
            f = fs.open_observed(path)
            if not f.complete:
                raise fs_error("too_large", f"{f.path} is {f.size} bytes, over the "
                               f"{fs.size_cap}-byte cap for whole-file edits and writes",
                               path=f.path, details={"size": f.size, "cap": fs.size_cap})
            return f
    return fs.open_for_edit(path)


def _create(fs: PolicyFileSystem, op: PatchOperation) -> PatchResult:
    display = fs.resolve(op.path).display
    assert op.diff is not None
    text = parse_create(op.diff, path=display)
    if is_notebook_path(display):  # a notebook created must be one (nbformat 4)
        try:
            validate_notebook_text(text)
        except FsError as err:
            err.path = display
            raise
    pending = fs.prepare_write(op.path, operation="write", create_only=True)
    try:
        commit = pending.commit(text.encode("utf-8"))
    except FsError as err:
        if err.code in ("stale", "not_observed"):  # a create-only put meets a file
            raise _exists(pending.path, "create_file") from err
        raise
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    return PatchResult(path=commit.path, action="created", version=commit.version,
                       size=commit.size, added=lines)


def _update(fs: PolicyFileSystem, op: PatchOperation, require_read: bool) -> PatchResult:
    source = fs.resolve(op.path)
    dest = fs.resolve(op.move_to) if op.move_to is not None else None
    assert op.diff is not None
    # A malformed diff is refused before any request.
    hunks = parse_update(op.diff, path=source.display)
    f = _open_for_patch(fs, op.path, require_read)
    doc = decode(f.read(), f.path)
    notebook = _as_notebook(doc.text, f.path)
    if notebook is not None:
        return _update_notebook(fs, op, f, notebook, doc.bom, hunks, dest, source)
    try:
        outcome = apply_update(doc.text, hunks, path=f.path,
                               diff_newline="\r\n" if "\r\n" in op.diff else "\n")
    except FsError:
        # The model wrote the diff from what it read; if that is outdated, "read it
        # again" is the useful answer, not "no match".
        if f.cached:
            f.verify()
        raise
    data = doc.encode(outcome.text)
    if dest is None or dest.backend_path == source.backend_path:
        commit = f.commit(data, operation="edit")
        return PatchResult(path=commit.path, action="updated", version=commit.version,
                           size=commit.size, hunks=outcome.hunks, added=outcome.added,
                           removed=outcome.removed)
    with move_scope(f.path, dest.display):
        moved = _move(fs, f, op, data)
    return moved.model_copy(update={"hunks": outcome.hunks, "added": outcome.added,
                                    "removed": outcome.removed})


def _as_notebook(text: str, path: str) -> Notebook | None:
    """``text`` parsed as a Jupyter notebook, if ``path`` names one and it is one (a
    broken ``.ipynb`` is patched as the text it is, so that an agent can repair it)."""
    if not is_notebook_path(path):
        return None
    try:
        return parse_notebook(text)
    except NotANotebook:
        return None


def _update_notebook(fs: PolicyFileSystem, op: PatchOperation, f: ObservedFile,
                     nb: Notebook, bom: bool, hunks: list[Hunk], dest: Target | None,
                     source: Target) -> PatchResult:
    """``update_file`` of a notebook: the diff applies to its cells' sources as read
    shows them (each cell's lines; a hunk stays within one cell), and every byte outside
    the sources it changes stays as it was (:func:`toolfs.tools.notebook.patch_sources`)."""
    assert op.diff is not None
    newline = "\r\n" if "\r\n" in op.diff else "\n"
    counts: list[PatchOutcome] = []

    def change(text: str) -> str:
        outcome = apply_update(text, hunks, path=f.path, diff_newline=newline)
        counts[:] = [outcome]
        return outcome.text

    if dest is not None and dest.backend_path != source.backend_path:
        try:  # moved: the patched notebook is created there, the source deleted
            data = notebook_tools.patched_bytes(fs, f.path, nb, bom, change)
        except FsError:
            if f.cached:  # planned on an outdated read: "read it again" helps more
                f.verify()
            raise
        moved = _move(fs, f, op, data)
        return moved.model_copy(update={"hunks": counts[0].hunks, "added": counts[0].added,
                                        "removed": counts[0].removed})
    commit, _ = notebook_tools.patch_sources(fs, f, nb, bom, change)
    done = counts[0]
    return PatchResult(path=commit.path, action="updated", version=commit.version,
                       size=commit.size, hunks=done.hunks, added=done.added,
                       removed=done.removed)


def _move(fs: PolicyFileSystem, f: ObservedFile, op: PatchOperation,
          data: bytes) -> PatchResult:
    """Create the destination from the patched bytes, then delete the source on the
    version those bytes came from; if that delete is refused (``stale``, ``not_found``),
    undo the copy (conditionally); if its outcome is unknown, keep the copy."""
    assert op.move_to is not None
    pending = fs.prepare_write(op.move_to, operation="write", create_only=True)
    try:
        copy = pending.commit(data)
    except FsError as err:
        if err.code in ("stale", "not_observed"):
            raise _exists(pending.path, "move_to") from err
        raise
    try:
        f.delete()
    except FsError as err:
        if err.code not in ("stale", "not_found"):
            # The delete may have happened all the same (a timeout after the store
            # applied it): removing the copy now could lose the file. Keep it, and say so.
            err.message += (f"; {copy.path} was created with the patched text and kept: "
                            f"both {f.path} and {copy.path} may exist now, read them "
                            "before retrying")
            err.details["copy_kept"] = copy.path
            err.args = (err.message,)
            raise
        try:
            fs.rm_file(op.move_to, version=copy.version)
            err.message += f"; nothing was moved ({copy.path} was not kept)"
        except FsError as undo:
            # Someone changed or removed the copy already: what they did stands.
            err.message += (f"; {copy.path} was created with the patched text, then changed "
                            f"or removed by someone else, and was left as they made it "
                            f"({undo.code})")
            err.details["copy_kept"] = copy.path
        err.args = (err.message,)
        raise
    return PatchResult(path=f.path, action="updated", version=copy.version, size=copy.size,
                       moved_to=copy.path)


def _delete(fs: PolicyFileSystem, op: PatchOperation) -> PatchResult:
    target = fs.resolve(op.path)
    fs.rm_file(op.path)
    return PatchResult(path=target.display, action="deleted", version=None, size=None)


def run_operation(fs: PolicyFileSystem, op: PatchOperation, *,
                  require_read: bool = True) -> PatchResult:
    """Apply one operation on a policy filesystem; raises :class:`FsError`."""
    if op.type == "create_file":
        return _create(fs, op)
    if op.type == "update_file":
        return _update(fs, op, require_read)
    return _delete(fs, op)


# -- raw Responses API --------------------------------------------------------------------


def _output(ws: Workspace, operation: Any, require_read: bool) -> ToolOutput:
    try:
        op = operation if isinstance(operation, PatchOperation) else PatchOperation.of(operation)
        result = ws.run(lambda fs: run_operation(fs, op, require_read=require_read))
    except FsError as err:
        # The advice names apply_patch's operations, not write/edit's arguments; a bad
        # argument the diff parser did not report (a path, say) is about the operation.
        err.details.setdefault("operation", "apply_patch_operation"
                               if err.code == "invalid_arguments" else "apply_patch")
        return render_output(ws.masked(err), ws.max_output_chars)
    return render_output(result, ws.max_output_chars)


@overload
def apply_patch(ws: Workspace, operation: list[Any] | tuple[Any, ...], *,
                require_read: bool = True) -> PatchReport: ...


@overload
def apply_patch(ws: Workspace, operation: Any, *, require_read: bool = True) -> ToolOutput: ...


def apply_patch(ws: Workspace, operation: Any, *,
                require_read: bool = True) -> ToolOutput | PatchReport:
    """Apply a Responses API ``apply_patch_call``'s operation (``{"type", "path",
    "diff", "move_to"?}``, or the call item itself). Never raises for tool errors or bad
    input: ``.text`` is what the model reads, ``.is_error`` says it failed.

    Given a **list** of operations (the calls of one model turn), they land all or
    nothing (:func:`apply_batch`) and the answer is a :class:`PatchReport`."""
    if isinstance(operation, list | tuple):
        return apply_batch(ws, operation, require_read=require_read)
    return _output(ws, operation, require_read)


async def apply_patch_async(ws: AsyncWorkspace, operation: Any, *,
                            require_read: bool = True) -> ToolOutput | PatchReport:
    """:func:`apply_patch` on an :class:`~toolfs.AsyncWorkspace`'s worker threads."""
    return await ws.call(_either, ws.sync, operation, require_read)


def _either(ws: Workspace, operation: Any, require_read: bool) -> ToolOutput | PatchReport:
    out: ToolOutput | PatchReport = apply_patch(ws, operation, require_read=require_read)
    return out


def apply_patch_call_output(call: Any, output: ToolOutput) -> dict[str, Any]:
    """The ``apply_patch_call_output`` input item answering ``call`` (an
    ``apply_patch_call`` item: dict or the openai SDK's ``ResponseApplyPatchToolCall``):
    ``{"type", "call_id", "status": "completed" | "failed", "output"}``, plus the call's
    ``caller`` when it has one (as the Agents SDK copies it)."""
    fields = _fields(call)
    call_id = fields.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise _invalid("the apply_patch_call has no call_id")
    item: dict[str, Any] = {"type": "apply_patch_call_output", "call_id": call_id,
                            "status": "failed" if output.is_error else "completed",
                            "output": output.text}
    caller = fields.get("caller")
    if caller is not None:
        dump = getattr(caller, "model_dump", None)
        item["caller"] = dump(mode="json", exclude_none=True) if callable(dump) else caller
    return item


def handle_apply_patch_call(ws: Workspace, call: Any, *,
                            require_read: bool = True) -> dict[str, Any]:
    """Apply an ``apply_patch_call`` item and return its ``apply_patch_call_output``."""
    return apply_patch_call_output(call, apply_patch(ws, call, require_read=require_read))


# -- toolfs's own tools as Responses API function calls ---------------------------------


def function_call_output(call: Any, output: ToolOutput) -> dict[str, Any]:
    """The ``function_call_output`` input item answering ``call`` (a ``function_call``
    item: dict or the openai SDK's ``ResponseFunctionToolCall``) with ``output``: its
    text, or, when it shows images (a read of an image, a PDF or a notebook's image
    outputs), an ``input_text`` and an ``input_image`` (a data URL) per image."""
    call_id = _fields(call).get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise _invalid("the function_call has no call_id")
    result: str | list[dict[str, Any]] = output.text
    if output.images:
        result = [{"type": "input_text", "text": output.text},
                  *({"type": "input_image", "image_url": image.data_url(), "detail": "auto"}
                    for image in output.images)]
    return {"type": "function_call_output", "call_id": call_id, "output": result}


def handle_function_call(ws: Workspace, call: Any) -> dict[str, Any]:
    """Run a ``function_call`` item of one of toolfs's tools (from
    ``tool_definitions("openai_responses")``) and return its ``function_call_output``."""
    fields = _fields(call)
    return function_call_output(call, ws.execute(fields.get("name", ""),
                                                 fields.get("arguments") or "{}"))


# -- a whole patch (*** Begin Patch ... *** End Patch) -----------------------------------


@dataclass(frozen=True)
class PatchReport:
    """What a whole patch did, file by file."""

    outputs: tuple[ToolOutput, ...]
    """One per operation, in patch order, when the batch landed; else one per file
    refused (the errors)."""
    skipped: tuple[str, ...]
    """Files not applied because of the errors (a batch lands all or nothing)."""
    max_chars: int = MAX_OUTPUT_CHARS
    """The budget of :attr:`text` (the workspace's ``max_output_chars``)."""

    @property
    def is_error(self) -> bool:
        return any(o.is_error for o in self.outputs)

    @property
    def text(self) -> str:
        """The model's text: each file's line(s), then what was not applied; within
        :attr:`max_chars` (a patch of thousands of files is summarised: the error and
        the first files in full, counts for the rest)."""
        parts = [o.text for o in self.outputs]
        if self.skipped:
            parts.append(_SKIPPED + ", ".join(self.skipped))
        full = "\n".join(parts)
        if len(full) <= self.max_chars:
            return full
        budget = self.max_chars
        failed = self.outputs[-1] if self.outputs and self.outputs[-1].is_error else None
        done = self.outputs[:-1] if failed is not None else self.outputs
        tail: list[str] = []
        if failed is not None:
            tail.append(bound_text(failed.text, max(budget // 2, 1)))
        if self.skipped:
            tail.append(_listed(_SKIPPED, self.skipped, max(budget // 4, len(_SKIPPED) + 30)))
        room = budget - sum(len(t) + 1 for t in tail)
        head: list[str] = []
        used = 0
        for n, out in enumerate(done):
            rest = len(done) - n
            note = f"... and {rest} more files applied"
            if used + len(out.text) + 1 + len(note) + 1 > room:
                head.append(note)
                break
            head.append(out.text)
            used += len(out.text) + 1
        return bound_text("\n".join(head + tail), budget)


_SKIPPED = "Not applied, because of the error above: "


def _listed(prefix: str, names: Sequence[str], budget: int) -> str:
    """``prefix`` and as many of ``names`` as fit in ``budget``, then how many more."""
    shown: list[str] = []
    used = len(prefix)
    for n, name in enumerate(names):
        more = f" and {len(names) - n} more"
        if used + len(name) + 2 + len(more) > budget:
            return prefix + ", ".join(shown) + more
        shown.append(name)
        used += len(name) + 2
    return prefix + ", ".join(shown)


def apply_patch_text(ws: Workspace, patch: str, *, require_read: bool = True) -> PatchReport:
    """Apply a whole patch (several files, Codex's ``apply_patch`` input), all or
    nothing.

    The patch is parsed, and every file's diff checked, before anything is stored: a
    malformed patch changes nothing. Its operations then land as one batch
    (:func:`apply_batch`): every file computed first, a refusal of any refuses the
    whole patch (each file with its reason), and a write failing midway rolls back the
    files already written.
    """
    try:
        if not isinstance(patch, str):
            raise fs_error("invalid_arguments", "a patch must be a string",
                           details={"operation": "apply_patch_envelope"})
        ops = [PatchOperation(type=f.type, path=f.path, diff=f.diff, move_to=f.move_to)
               for f in parse_patch(patch)]
        for op in ops:
            if op.diff is not None:
                check = parse_create if op.type == "create_file" else parse_update
                check(op.diff, path=op.path)
    except FsError as err:
        return PatchReport(outputs=(render_output(ws.masked(err), ws.max_output_chars),),
                           skipped=(), max_chars=ws.max_output_chars)
    return apply_batch(ws, ops, require_read=require_read)


# -- several operations, all or nothing ---------------------------------------------------


@dataclass
class _Slot:
    """One file of a batch: the version it must be at, its bytes there, its new bytes."""

    display: str
    expected: FileVersion | None
    base: bytes | None
    new: bytes | None
    created: Literal["create_file", "move_to"] | None = None


def _plan_batch(fs: PolicyFileSystem, ops: Sequence[PatchOperation], require_read: bool
                ) -> tuple[dict[str, _Slot], list[tuple[PatchOperation, PatchResult]],
                           dict[str, FsError]]:
    """Every operation computed in memory, in order (a later operation on a file sees
    what the earlier ones made of it); nothing is stored. Returns the files' slots,
    each operation's result-to-be, and each refused file's reason."""
    slots: dict[str, _Slot] = {}
    results: list[tuple[PatchOperation, PatchResult]] = []
    refused: dict[str, FsError] = {}

    def slot(path: str, *, for_delete: bool = False) -> _Slot:
        target = fs.resolve(path)
        held = slots.get(target.backend_path)
        if held is not None:
            if held.new is None:
                raise fs_error("not_found", f"{held.display} is deleted by an earlier "
                               "operation of this batch", path=held.display)
            return held
        f = fs.open_for_edit(path) if for_delete else _open_for_patch(fs, path, require_read)
        if not f.complete:
            raise fs_error("too_large", f"{f.path} is {f.size} bytes, over the "
                           f"{fs.size_cap}-byte cap for whole-file edits and writes",
                           path=f.path, details={"size": f.size, "cap": fs.size_cap})
        data = bytes(f.read())
        made = _Slot(f.path, f.version, data, data)
        slots[target.backend_path] = made
        return made

    def create(path: str, data: bytes, what: Literal["create_file", "move_to"]) -> _Slot:
        target = fs._writable(path, "write")
        held = slots.get(target.backend_path)
        if held is not None and held.new is not None:
            raise _exists(held.display, what)
        if held is None:
            held = slots[target.backend_path] = _Slot(target.display, None, None, None,
                                                      created=what)
        held.new = data
        return held

    for op in ops:
        try:
            if op.type == "create_file":
                assert op.diff is not None
                shown = fs.resolve(op.path).display
                text = parse_create(op.diff, path=shown)
                if is_notebook_path(shown):  # a notebook created must be one
                    try:
                        validate_notebook_text(text)
                    except FsError as err:
                        err.path = shown
                        raise
                made = create(op.path, text.encode("utf-8"), "create_file")
                lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
                results.append((op, PatchResult(path=made.display, action="created",
                                                version=None, size=len(text.encode()),
                                                added=lines)))
            elif op.type == "delete_file":
                held = slot(op.path, for_delete=True)
                held.new = None
                results.append((op, PatchResult(path=held.display, action="deleted",
                                                version=None, size=None)))
            else:
                assert op.diff is not None
                hunks = parse_update(op.diff, path=fs.resolve(op.path).display)
                held = slot(op.path)
                assert held.new is not None
                doc = decode(held.new, held.display)
                newline = "\r\n" if "\r\n" in op.diff else "\n"
                notebook = _as_notebook(doc.text, held.display)
                if notebook is not None:  # the diff applies to the cells' sources
                    counts: list[PatchOutcome] = []

                    def change(text: str, h: list[Hunk] = hunks, path: str = held.display,
                               nl: str = newline, c: list[PatchOutcome] = counts) -> str:
                        done = apply_update(text, h, path=path, diff_newline=nl)
                        c[:] = [done]
                        return done.text

                    data = notebook_tools.patched_bytes(fs, held.display, notebook,
                                                        doc.bom, change)
                    outcome = counts[0]
                else:
                    outcome = apply_update(doc.text, hunks, path=held.display,
                                           diff_newline=newline)
                    data = doc.encode(outcome.text)
                moved: str | None = None
                if op.move_to is not None and \
                        fs.resolve(op.move_to).backend_path != fs.resolve(op.path).backend_path:
                    moved = create(op.move_to, data, "move_to").display
                    held.new = None
                else:
                    held.new = data
                results.append((op, PatchResult(
                    path=held.display, action="updated", version=None, size=len(data),
                    moved_to=moved, hunks=outcome.hunks, added=outcome.added,
                    removed=outcome.removed)))
        except FsError as err:
            refused.setdefault(err.path or op.path, err)
    return slots, results, refused


def apply_batch(ws: Workspace, operations: Sequence[Any], *,
                require_read: bool = True) -> PatchReport:
    """Apply several apply_patch operations **all or nothing**
    (:func:`toolfs.undo.atomic.commit_all`).

    Every operation is computed first, in order, in memory (a later operation on a file
    applies to what the earlier ones made of it): a diff that does not apply, a file not
    read, a file changed since it was read (``stale``, with the diff of that change), or
    one that overlaps another change under ``Policy(on_stale="merge")``, refuses the
    whole batch, each file with its reason; nothing is written. Then each file is
    written conditionally on the version that was checked; if a write fails midway, the
    files already written are restored (conditionally), and the report says so. No
    isolation: another reader may see the files midway. Never raises."""
    max_chars = ws.max_output_chars
    try:
        ops = [op if isinstance(op, PatchOperation) else PatchOperation.of(op)
               for op in operations]
    except FsError as err:
        err.details.setdefault("operation", "apply_patch_operation")
        return PatchReport(outputs=(render_output(ws.masked(err), max_chars),),
                           skipped=(), max_chars=max_chars)

    def run(fs: PolicyFileSystem) -> tuple[list[tuple[PatchOperation, PatchResult]],
                                           dict[str, FsError], list[str]]:
        slots, results, refused = _plan_batch(fs, ops, require_read)
        if refused:
            return results, refused, []
        planned = [Planned(s.display, s.expected, s.new, s.base) for s in slots.values()
                   if not (s.expected is None and s.new is None)
                   and not (s.new is not None and s.new == s.base)]
        outcome = commit_all(fs, planned, tool="apply_patch")
        failed = dict(outcome.refused)
        for s in slots.values():
            why = failed.get(s.display)
            if s.created is not None and why is not None and \
                    why.code in ("stale", "not_observed"):  # a create meets a file
                failed[s.display] = _exists(s.display, s.created)
        if not failed:
            results = [(op, r.model_copy(update={"version": outcome.versions.get(
                r.moved_to or r.path)})) for op, r in results]
        notes = [f"{p}: {state}" for p, state in outcome.states.items() if state != "old"] \
            if failed else []
        return results, failed, notes

    try:
        results, refused, notes = ws.run(run)
    except FsError as err:
        err.details.setdefault("operation", "apply_patch")
        return PatchReport(outputs=(render_output(ws.masked(err), max_chars),),
                           skipped=tuple(op.path for op in ops), max_chars=max_chars)
    if not refused:
        return PatchReport(outputs=tuple(render_output(r, max_chars) for _, r in results),
                           skipped=(), max_chars=max_chars)
    outputs = []
    for why in refused.values():
        why.details.setdefault("operation", "apply_patch")
        if notes:
            why.details["states"] = notes
        outputs.append(render_output(ws.masked(why), max_chars))
    return PatchReport(outputs=tuple(outputs), skipped=tuple(
        dict.fromkeys(op.path for op in ops if op.path not in refused)),
        max_chars=max_chars)


# -- the Agents SDK -----------------------------------------------------------------------


def _result(output: ToolOutput) -> ApplyPatchResult:
    try:
        from agents.editor import ApplyPatchResult
    except ImportError as exc:
        raise missing_extra("openai-agents", "the apply_patch editor's SDK results",
                            exc) from exc

    return ApplyPatchResult(status="failed" if output.is_error else "completed",
                            output=output.text)


class ApplyPatchEditor:
    """The Agents SDK's ``ApplyPatchEditor`` over a :class:`toolfs.Workspace`::

        agent = Agent(..., tools=[ApplyPatchTool(editor=ApplyPatchEditor(ws))])

    Each method takes the SDK's ``ApplyPatchOperation`` and returns its
    ``ApplyPatchResult`` (``status`` ``"failed"`` with toolfs's error text when the
    operation was refused; it never raises for tool errors). ``require_read``: see the
    module docstring. The methods block: in an async server prefer
    :class:`AsyncApplyPatchEditor`.
    """

    def __init__(self, ws: Workspace, *, require_read: bool = True) -> None:
        self.ws = ws
        self.require_read = require_read

    def _apply(self, operation: Any, kind: OperationType) -> ApplyPatchResult:
        fields = {**_fields(operation), "type": kind}
        return _result(apply_patch(self.ws, fields, require_read=self.require_read))

    def create_file(self, operation: Any) -> ApplyPatchResult:
        """Create a file from a ``+``-lines diff (create-only)."""
        return self._apply(operation, "create_file")

    def update_file(self, operation: Any) -> ApplyPatchResult:
        """Apply a V4A diff (and ``move_to``) on the version this context observed."""
        return self._apply(operation, "update_file")

    def delete_file(self, operation: Any) -> ApplyPatchResult:
        """Delete a file, on the version this context observed."""
        return self._apply(operation, "delete_file")


class AsyncApplyPatchEditor:
    """:class:`ApplyPatchEditor` for an :class:`toolfs.AsyncWorkspace`: coroutine methods
    (the Agents SDK awaits them), run on the workspace's worker threads so the event loop
    is never blocked."""

    def __init__(self, ws: AsyncWorkspace, *, require_read: bool = True) -> None:
        self.ws = ws
        self._sync = ApplyPatchEditor(ws.sync, require_read=require_read)

    async def create_file(self, operation: Any) -> ApplyPatchResult:
        return await self.ws.call(self._sync.create_file, operation)

    async def update_file(self, operation: Any) -> ApplyPatchResult:
        return await self.ws.call(self._sync.update_file, operation)

    async def delete_file(self, operation: Any) -> ApplyPatchResult:
        return await self.ws.call(self._sync.delete_file, operation)
