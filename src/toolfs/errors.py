"""The one error type of toolfs, and its stable codes.

Every failure a tool call can meet surfaces as :class:`FsError` with one of a fixed
set of codes. Where a Python builtin means the same thing, the raised class also
derives from it, so ordinary ``except FileNotFoundError`` code keeps working::

    FsError                                   code
    ├── InvalidArguments  (ValueError)        invalid_arguments
    ├── NotFound          (FileNotFoundError) not_found
    ├── MissingBucket     (FileNotFoundError) missing_bucket
    ├── NotAFile          (IsADirectoryError) not_a_file
    ├── NotText           (ValueError)        not_text
    ├── TooLarge          (ValueError)        too_large
    ├── NotObserved       (PermissionError)   not_observed
    ├── Stale             (PermissionError)   stale
    │   └── AlreadyExists (FileExistsError)   stale, details["exists"]
    ├── NoMatch           (ValueError)        no_match
    ├── AmbiguousMatch    (ValueError)        ambiguous_match
    ├── OutsideRoot       (PermissionError)   outside_root
    ├── Denied            (PermissionError)   denied
    ├── BackendError      (OSError)           backend_error
    └── Unsupported       (NotImplementedError) unsupported

Build errors with ``FsError(code, message, path, details)`` (positional or keyword; it
returns the subclass of ``code``), :func:`fs_error`, or a subclass directly
(``Stale(message, path=..., details=...)``); foreign exceptions
are translated at the boundary with ``raise fs_error(...) from exc`` so the cause is
kept as ``__cause__``.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

ErrorCode = Literal[
    "invalid_arguments",
    "not_found",
    "missing_bucket",
    "not_a_file",
    "not_text",
    "too_large",
    "not_observed",
    "stale",
    "no_match",
    "ambiguous_match",
    "outside_root",
    "denied",
    "backend_error",
    "unsupported",
]

ERROR_CODES: frozenset[str] = frozenset(get_args(ErrorCode))

# What the model should do next, per code; shown by renderers after the message.
ADVICE: dict[str, str] = {
    "invalid_arguments": "Fix the arguments and call the tool again.",
    "not_found": "Check the path; create the file with write if it should exist.",
    "missing_bucket": "The bucket or container of this workspace does not exist, and no "
                      "tool call can create it: stop retrying and tell the user, who can "
                      "create it or open the workspace on one that exists.",
    "not_a_file": "Give the path of a file, not a directory.",
    "not_text": "Only UTF-8 text files can be edited; read also shows images (PNG, JPEG, GIF, "
                "WebP) and PDFs, and no other binary files.",
    "too_large": "Read the file in windows with offset and limit; it cannot be rewritten whole.",
    "not_observed": "Read the file first, then retry the change.",
    "stale": "The file changed since you last read it. Read it again, then redo the change.",
    "no_match": "Read the file and copy old_string exactly, including whitespace.",
    "ambiguous_match": "Add surrounding context to old_string, or set replace_all to true.",
    "outside_root": "Use a path inside the workspace root.",
    "denied": "This path or operation is not allowed in this workspace.",
    "backend_error": "The storage backend failed; retrying later may help.",
    "unsupported": "This operation is not available on this backend.",
}


STALE_SHOWN_ADVICE = ("Every change since your read is shown above, and this counts as "
                      "reading it: redo your change on the current text; no need to read "
                      "the file again.")
"""The advice of a ``stale`` refusal that showed the whole change since the read (the
policy then recorded the current version as observed: ``details["counts_as_read"]``)."""

TOO_LARGE_RESULT_ADVICE = ("Make the change smaller, or put the content in several "
                           "smaller files: a file cannot grow past the cap.")
"""The advice of a ``too_large`` whose size is what a change would make the file."""

# Where one code means different things for different operations.
_ADVICE_BY_OPERATION: dict[tuple[str, Any], str] = {
    ("too_large", "write"): "Write less content: split it into several smaller files.",
    # read of an image or a PDF (toolfs.formats.media)
    ("not_text", "read_media"): "This file cannot be shown; do not retry the read.",
    ("too_large", "read_media"): "Images and PDFs are read whole: this one is over the size "
                                 "cap and cannot be shown.",
    ("unsupported", "read_media"): "This file cannot be shown here; tell the user that the "
                                   "toolfs[media] extra is needed.",
    ("stale", "create"): "The file already exists: choose another name, or read it and "
                         "replace it with a write.",
    ("not_a_file", "ls"): "Give the path of a directory; use read for a file.",
    # apply_patch (V4A diffs): the model fixes a diff, not old_string.
    ("no_match", "apply_patch"): "Read the file again and copy the context and '-' lines "
                                 "exactly, including whitespace, in file order.",
    ("ambiguous_match", "apply_patch"): "Add context lines, or an '@@ <line>' header naming "
                                        "the enclosing class or function.",
    ("invalid_arguments", "apply_patch"): "Fix the diff: hunks start with '@@'; each line "
                                          "starts with ' ' (context), '-' or '+'.",
    ("not_found", "apply_patch"): "Check the path; make a new file with a create_file "
                                  "operation.",
    ("invalid_arguments", "create_file"): "Read the file and change it with update_file, or "
                                          "delete it first.",
    ("invalid_arguments", "move_to"): "Choose a move_to that does not exist yet.",
    ("not_found", "notebook_edit"): "Read the notebook to see its cells and their ids.",
    # apply_patch refusals that are not about the diff's hunks.
    ("invalid_arguments", "apply_patch_operation"): (
        "Send one operation: type create_file, update_file or delete_file, a path "
        "relative to the workspace root, and a diff for create_file and update_file."),
    ("invalid_arguments", "apply_patch_envelope"): (
        "Write the patch as '*** Begin Patch', then for each file '*** Add File: <path>', "
        "'*** Update File: <path>' or '*** Delete File: <path>' and its lines, then "
        "'*** End Patch'."),
}


class _ByCode(type):
    """Metaclass of :class:`FsError`: ``FsError(code, ...)`` builds the class of ``code``."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is FsError:
            code, message, path, details = _base_arguments(*args, **kwargs)
            return _BY_CODE[code](message, path=path, details=details)
        return super().__call__(*args, **kwargs)


class FsError(Exception, metaclass=_ByCode):
    """A tool-level failure with a stable ``code``.

    ``FsError(code, message, path=None, details=None)``, positional or keyword, builds the
    subclass of ``code`` (``FsError("stale", "...")`` is a :class:`Stale`, so also a
    ``PermissionError``). The subclasses take the message first:
    ``Stale("...", path=..., details=...)``.

    Attributes:
        code: one of :data:`ERROR_CODES`.
        message: a sentence for the model and the user.
        path: the display path involved (relative to the workspace root), if any.
        details: structured facts (line numbers, caps, suggestions, ...), JSON-safe.
    """

    code: ErrorCode = "backend_error"

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        path: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown error code {code!r}")
        self.code = code
        self.message = message
        self.path = path
        self.details: dict[str, Any] = dict(details or {})
        super().__init__(message)

    @property
    def advice(self) -> str:
        """What the model should do next (per code, refined by ``details["operation"]``
        where one code covers different situations, for ``too_large`` by
        ``details["result"]``: the change, not the file, is too large, and for ``stale``
        by ``details["counts_as_read"]``: the refusal showed the whole change)."""
        if self.code == "too_large" and self.details.get("result"):
            return TOO_LARGE_RESULT_ADVICE
        if self.code == "stale" and self.details.get("counts_as_read"):
            return STALE_SHOWN_ADVICE
        return _ADVICE_BY_OPERATION.get((self.code, self.details.get("operation")),
                                        ADVICE[self.code])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe view: ``{"code", "message", "path", "details"}``."""
        return {"code": self.code, "message": self.message, "path": self.path,
                "details": self.details}

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, "
                f"path={self.path!r})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.code, self.message, self.path, self.details))


def _base_arguments(
    code: ErrorCode, message: str, path: str | None = None,
    details: dict[str, Any] | None = None,
) -> tuple[ErrorCode, str, str | None, dict[str, Any] | None]:
    """The arguments of ``FsError(code, message, path, details)``, checked."""
    if code not in _BY_CODE:
        raise ValueError(f"unknown error code {code!r}; expected one of "
                         f"{', '.join(sorted(ERROR_CODES))}")
    return code, message, path, details


class _Coded(FsError):
    """A subclass with a fixed code: ``Cls(message, *, path=None, details=None)``."""

    def __init__(  # the code is the class's, so the message comes first
        self,
        message: str,
        *,
        path: str | None = None,
        details: dict[str, Any] | None = None,
        code: ErrorCode | None = None,
    ) -> None:
        if code is not None and code != type(self).code:
            raise ValueError(f"{type(self).__name__} has code {type(self).code!r}, not "
                             f"{code!r}; use FsError({code!r}, ...) or fs_error()")
        super().__init__(type(self).code, message, path, details)


class InvalidArguments(_Coded, ValueError):
    code = "invalid_arguments"


class NotFound(_Coded, FileNotFoundError):
    code = "not_found"


class MissingBucket(_Coded, FileNotFoundError):
    """The bucket (S3, GCS) or container (Azure) itself does not exist:
    ``details["bucket"]`` names it (and ``details["container"]`` on Azure)."""

    code = "missing_bucket"


class NotAFile(_Coded, IsADirectoryError):
    code = "not_a_file"


class NotText(_Coded, ValueError):
    code = "not_text"


class TooLarge(_Coded, ValueError):
    code = "too_large"


class NotObserved(_Coded, PermissionError):
    code = "not_observed"


class Stale(_Coded, PermissionError):
    code = "stale"


class AlreadyExists(Stale, FileExistsError):
    """``stale`` for an exclusive create (``open(path, "xb")``, ``pipe_file(path,
    mode="create")``) of a file that exists: still the code ``stale`` (and a
    :class:`Stale`), and a ``FileExistsError``, as fsspec and ``open(path, "x")``
    raise. Built by :func:`fs_error` for ``stale`` with ``details["exists"]``."""


class NoMatch(_Coded, ValueError):
    code = "no_match"


class AmbiguousMatch(_Coded, ValueError):
    code = "ambiguous_match"


class OutsideRoot(_Coded, PermissionError):
    code = "outside_root"


class Denied(_Coded, PermissionError):
    code = "denied"


class BackendError(_Coded, OSError):
    code = "backend_error"


class Unsupported(_Coded, NotImplementedError):
    code = "unsupported"


_BY_CODE: dict[str, type[_Coded]] = {
    cls.code: cls
    for cls in (InvalidArguments, NotFound, MissingBucket, NotAFile, NotText, TooLarge,
                NotObserved, Stale, NoMatch, AmbiguousMatch, OutsideRoot, Denied,
                BackendError, Unsupported)
}


def fs_error(
    code: ErrorCode, message: str, *, path: str | None = None,
    details: dict[str, Any] | None = None,
) -> FsError:
    """Build the :class:`FsError` subclass that matches ``code`` (``stale`` with
    ``details["exists"]``: :class:`AlreadyExists`)."""
    if code == "stale" and details and details.get("exists") is True:
        return AlreadyExists(message, path=path, details=details)
    return _BY_CODE[code](message, path=path, details=details)


def _rebuild(code: ErrorCode, message: str, path: str | None, details: dict[str, Any]) -> FsError:
    return fs_error(code, message, path=path, details=details)


# -- optional extras ---------------------------------------------------------------------

PROTOCOL_EXTRAS: dict[str, str] = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs",
                                   "abfs": "azure", "abfss": "azure", "az": "azure"}
"""The extra that installs the fsspec filesystem of a URL's protocol."""


def install_hint(extra: str) -> str:
    """The command that installs toolfs's optional ``extra``, released or from a checkout."""
    return (f"pip install 'toolfs[{extra}]' (from a checkout of toolfs: "
            f"pip install -e '.[{extra}]')")


def missing_extra(extra: str, what: str, exc: ImportError) -> ImportError:
    """The ``ImportError`` to raise when ``what`` (a part of toolfs) cannot import a
    module of the optional ``extra``: it names the missing module and the command that
    installs the extra, whichever of the extra's modules is missing (``raise
    missing_extra(...) from exc``)."""
    # The distribution's top-level module ("mcp", not "mcp.types").
    missing = exc.name.split(".")[0] if exc.name else "a module it needs"
    return ImportError(f"{what} needs the optional extra {extra!r}, and {missing} is not "
                       f"installed: {install_hint(extra)}", name=exc.name)
