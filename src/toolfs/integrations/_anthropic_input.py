"""What every command of Anthropic's text editor and memory tool shares before it runs.

The two tools' names and limits, the refusal in the reference implementations' wording
(:class:`_Refusal`, which carries toolfs's code), the advice that follows each code in
these tools' terms, and the checks of the model's input (:func:`_checked`: a known
command, its fields, their types). The engine (:mod:`toolfs.integrations._anthropic_commands`)
runs a command only on input that passed here. The sources cited as *[editor]*,
*[memory docs]* and *[memory SDK]* are named in that module's docstring.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolfs.errors import FsError, fs_error
from toolfs.results import ToolResult
from toolfs.tools import MAX_OFFSET

TEXT_EDITOR_TYPE = "text_editor_20250728"
TEXT_EDITOR_NAME = "str_replace_based_edit_tool"
MEMORY_ROOT = "/memories"

SNIPPET_CONTEXT = 4
"""Lines shown before and after a change (the reference editor's ``SNIPPET_LINES``)."""
MAX_SHOWN_PATH = 200
"""Characters of a model-given path echoed back in a message."""
MAX_SHOWN_OLD = 200
"""Characters of ``old_str`` echoed back in a message."""
MAX_DIRECTORY_ENTRIES = 1_000
"""Entries a directory ``view`` lists (two levels, hidden ones excluded)."""
MAX_SIZED_FILES = 10_000
"""Files a memory directory ``view`` adds up for its directories' sizes (one listing);
past that the directories' sizes are shown as ``-``."""
MAX_TREE_FILES = 1_000
"""Files one directory ``delete`` or ``rename`` moves or removes."""

# [editor] str_replace and insert: the sentence after the snippet.
_SNIPPET_NOTE = ("Review the changes and make sure they are as expected. Edit the file again "
                 "if necessary.")
_INSERT_NOTE = ("Review the changes and make sure they are as expected (correct indentation, no "
                "duplicate lines, etc). Edit the file again if necessary.")

# What the model should do next, in the words of these tools (toolfs's advice names
# read/edit/old_string, which the text editor and memory tool do not have).
_ADVICE: dict[str, str] = {
    "not_found": "Check the path (view a directory to list it); use the create command "
                 "for a new file.",
    "not_a_file": "Give the path of a file; view lists a directory.",
    "too_large": "View the file in windows with view_range; it cannot be rewritten whole.",
    "not_observed": "View the file first, then retry the command.",
    "stale": "The file changed since you last viewed it. View it again, then redo the "
             "change.",
    "no_match": "View the file and copy old_str exactly, including whitespace and "
                "indentation.",
    "ambiguous_match": "Add surrounding lines to old_str so that it matches exactly once.",
    "outside_root": "Use a path inside the workspace.",
}
_MEMORY_ADVICE: dict[str, str] = {
    **_ADVICE,
    "outside_root": "Use a path under /memories.",
    "not_found": "Check the path (view /memories to list it); use the create command for a "
                 "new file.",
}


def _shown(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


class _Refusal(Exception):
    """A command refused with the reference wording; ``error`` carries toolfs's code."""

    def __init__(self, message: str, error: FsError) -> None:
        super().__init__(message)
        self.message = message
        self.error = error


def _refuse(code: Any, message: str, *, path: str | None = None,
            cause: FsError | None = None) -> _Refusal:
    """A refusal with the reference ``message`` and toolfs's ``code``. With ``cause``,
    toolfs's own error (its message and details) travels as the output's ``error``,
    re-coded when the command means something else by it (a create-only write refused
    because the destination of a rename exists)."""
    if cause is None:
        return _Refusal(message, fs_error(code, message, path=path))
    if cause.code == code:
        return _Refusal(message, cause)
    err = fs_error(code, cause.message, path=cause.path, details=cause.details)
    err.__cause__ = cause
    return _Refusal(message, err)


@dataclass(frozen=True)
class _Done:
    text: str
    value: ToolResult | None


def _line_number(value: object) -> bool:
    """An ``int`` (not a ``bool``) small enough to be shown back: line numbers are
    echoed in answers, and Python will not print an int of more than 4,300 digits."""
    return isinstance(value, int) and not isinstance(value, bool) and \
        -MAX_OFFSET <= value <= MAX_OFFSET


def _invalid(message: str) -> _Refusal:
    return _refuse("invalid_arguments", message)


# -- input checks ----------------------------------------------------------------------

_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # command: (required, optional); insert takes new_str or insert_text (checked apart)
    "view": (("path",), ("view_range",)),
    "create": (("path", "file_text"), ()),
    "str_replace": (("path", "old_str"), ("new_str",)),
    "insert": (("path", "insert_line"), ("new_str", "insert_text")),
    "delete": (("path",), ()),
    "rename": (("old_path", "new_path"), ()),
}
_STRINGS = {"path", "file_text", "old_str", "new_str", "insert_text", "old_path", "new_path"}


def _checked(arguments: object, commands: tuple[str, ...], tool: str) -> dict[str, Any]:
    """The model's input, checked: a known command, its fields and their types."""
    if not isinstance(arguments, Mapping):
        raise _invalid("the input must be a JSON object")
    given = dict(arguments)
    command = given.get("command")
    allowed = f"The allowed commands for the {tool} tool are: {', '.join(commands)}"
    if command is None:
        raise _invalid(f"Parameter `command` is required. {allowed}")
    if not isinstance(command, str) or command not in commands:
        # [editor]: "Unrecognized command {command}. The allowed commands for the
        # {self.name} tool are: ..."
        raise _invalid(f"Unrecognized command {_shown(str(command), 50)}. {allowed}")
    required, optional = _FIELDS[command]
    for name in given:
        if name != "command" and name not in required + optional:
            raise _invalid(f"unknown parameter {_shown(str(name), 50)!r} for `{command}` "
                           f"(its parameters are {', '.join(required + optional)})")
    for name in required:
        if name not in given:
            raise _invalid(f"Parameter `{name}` is required for command: {command}")
    for name, value in given.items():
        if name in _STRINGS and not isinstance(value, str):
            raise _invalid(f"Parameter `{name}` must be a string")
        if name in _STRINGS and not _encodable(value):
            # JSON can carry a lone surrogate; no file can hold one. Refused here, as
            # the model's mistake, before it can surface as a storage failure.
            raise _invalid(f"Parameter `{name}` is not valid Unicode (a lone surrogate)")
    if command == "insert":
        if isinstance(given["insert_line"], bool) or not isinstance(given["insert_line"], int):
            raise _invalid("Parameter `insert_line` must be an integer")
        if not _line_number(given["insert_line"]):
            raise _invalid(f"Parameter `insert_line` must be from {-MAX_OFFSET} to "
                           f"{MAX_OFFSET}")
        texts = [given[k] for k in ("new_str", "insert_text") if k in given]
        if not texts:
            raise _invalid("Parameter `new_str` (or `insert_text`) is required for command: "
                           "insert")
        if len(texts) == 2 and texts[0] != texts[1]:
            raise _invalid("give `new_str` or `insert_text`, not two different texts")
        given["text"] = texts[0]
    if command == "view":
        view_range = given.get("view_range")
        if view_range is not None and not (
                isinstance(view_range, list | tuple) and len(view_range) == 2
                and all(isinstance(n, int) and not isinstance(n, bool) for n in view_range)):
            raise _invalid("Invalid `view_range`. It should be a list of two integers.")
        if view_range is not None and not all(_line_number(n) for n in view_range):
            raise _invalid(f"Invalid `view_range`: its elements must be from {-MAX_OFFSET} "
                           f"to {MAX_OFFSET}.")
    return given


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_text(text: str, path: str) -> None:
    """Refuse text that could not be stored and read back (NUL, lone surrogates)."""
    if "\x00" in text:
        raise fs_error("invalid_arguments", "the text contains a NUL character; only text "
                       "can be written", path=path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise fs_error("invalid_arguments", "the text is not valid Unicode (a lone "
                       "surrogate)", path=path) from exc


def _format_size(size: int) -> str:
    """``4.0K``-style sizes, as the SDK's reference backend shows them."""
    if size == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    i = min((size.bit_length() - 1) // 10, len(units) - 1)
    value = size / (1024 ** i)
    return f"{int(value)}{units[i]}" if value == int(value) else f"{value:.1f}{units[i]}"
