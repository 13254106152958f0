"""The guard's refusals in words for a person at a notebook.

A write through a file handle (``open(path, "wb")``: what pandas, Polars, DuckDB and
PyArrow do) is a person's write, not a model's tool call. When the guard refuses it
(``stale``, ``not_observed``), the message says which file changed and how, that
nothing was written, and what to do next in a notebook's terms. The code, the class
(:class:`~toolfs.errors.Stale`, :class:`~toolfs.errors.NotObserved`, both
``PermissionError``) and the details stay what they were; only the words change, and
only on that path: the tools' own messages for models are left alone.
"""

from __future__ import annotations

import datetime
from typing import Any

from toolfs.backends import Create, Update
from toolfs.errors import FsError
from toolfs.policy.commits import PendingChange

HOW_TO_READ = ("through the same URL and storage options (pd.read_csv, pl.read_parquet, "
               "...: any read is an observation)")
OVERWRITE_OPTION = "policy={'require_observation': False}"


def for_people(err: FsError, pending: PendingChange) -> FsError:
    """``err`` (changed in place) with a message for a person, when it is a refusal of
    the guard; any other error is returned as it was."""
    if err.code not in ("stale", "not_observed") or pending.exclusive \
            or err.details.get("operation") == "create":
        return err
    owner, target = pending._owner, pending._target
    # A filesystem made from a URL names files by the wrapped filesystem's own paths.
    name = owner.jail.join(target.display) if owner.absolute_paths else target.display
    context = f"this context ({owner.context_id!r})"
    if err.code == "not_observed":
        text = (f"{name} already exists and {context} has not read it, so this write "
                f"would replace it unseen. Nothing was written. Read it first "
                f"{HOW_TO_READ}, then write. A context meant to overwrite files it has not read "
                f"can say so with {OVERWRITE_OPTION} in its toolfs options.")
    else:
        if isinstance(pending.mode, Update):
            read = pending.mode.expected
            seen = f"you read version {read.kind}:{read.value[:16]}"
            err.details.setdefault("read_version", str(pending.mode.expected))
        elif isinstance(pending.mode, Create):
            seen = "it did not exist when this context looked"
        else:
            seen = "it changed while this write was on its way"
        now = _now(owner.fs, target.backend_path)
        diff = err.details.get("diff")
        if err.details.get("counts_as_read") is True:
            # The whole change is shown (below) and the ledger took it as read: the
            # next write replaces it, which the person must know before writing again.
            then = (f"This context has now seen that change (shown below), so writing "
                    f"again replaces it. To keep both, read the file again "
                    f"{HOW_TO_READ}, redo your change and write again.")
        else:
            then = (f"To keep both, read the file again {HOW_TO_READ}, redo your change "
                    f"and write again. To replace the other change on purpose, read the "
                    f"file again first, then write.")
        text = (f"{name} changed since {context} read it: {seen}; {now}. Your write was "
                f"refused and nothing was written: the file keeps the other change. "
                f"{then}")
        if isinstance(diff, str) and diff:
            text += f"\n\nWhat changed since your read:\n{diff.rstrip()}"
    err.message = text
    err.args = (text,)
    err.details["context_id"] = owner.context_id
    return err


def _now(fs: Any, backend_path: str) -> str:
    """What the file is now, from one metadata request (only on this refusal path); a
    description of "changed" when that request fails."""
    try:
        try:
            info = fs.info(backend_path, refresh=True)  # not a listing cached before
        except TypeError:
            info = fs.info(backend_path)
    except FileNotFoundError:
        return "it has been deleted since"
    except Exception:  # a hint only: the refusal stands whatever this says
        return "it has been changed since"
    parts = [f"{info['size']} bytes"] if isinstance(info.get("size"), int) else []
    when = _modified(info)
    if when is not None:
        parts.append(f"last modified {when}")
    return f"it is now {', '.join(parts)}" if parts else "it has been changed since"


def _modified(info: dict[str, Any]) -> str | None:
    for key in ("LastModified", "last_modified", "mtime", "updated", "created"):
        value = info.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = datetime.datetime.fromtimestamp(value, datetime.UTC)
        if isinstance(value, datetime.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=datetime.UTC)
            return value.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        if isinstance(value, str) and value:
            return value
    return None
