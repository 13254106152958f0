"""A room per principal: ``toolfs serve --principals principals.toml``.

The file maps a token's claims to what its bearer may do::

    [[principal]]
    name = "alice"
    match = { sub = "alice" }          # or client_id = "...", groups = "...", token_sha256 = "..."
    root = "teams/alice"
    scopes = ["files:read", "files:write"]   # or read_only = true
    deny = ["private/**"]
    on_stale = "merge"

* ``match``: every key given must hold (``sub``, ``client_id``, one of the token's
  ``groups``, or the SHA-256 of a static token, never the token itself); the first
  principal in file order that matches is the token's. A token no principal matches is
  refused (403), never given a room by default.
* ``root``: a relative sub-path of the server's root (``"."``: the whole of it), confined
  as the server's root is.
* ``scopes`` (``files:read``, ``files:write``) or ``read_only = true``: exactly one of them.
  A principal without ``files:write`` is neither offered nor allowed ``write``, ``edit``
  or ``notebook_edit``.
* ``deny``: globs refused on top of the server's ``--deny``; ``on_stale``: ``refuse``
  or ``merge`` (default: the server's ``--on-stale``).

The file is read with :mod:`tomllib` and validated with pydantic when the server starts;
:func:`load_principals` raises :class:`PrincipalsError` naming the file and line.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = ["WRITE_TOOLS", "Match", "Principal", "Principals", "PrincipalsError",
           "load_principals", "parse_principals"]

Scope = Literal["files:read", "files:write"]
WRITE_TOOLS = frozenset({"write", "edit", "notebook_edit"})
"""The tools that change files: offered only to principals with ``files:write``."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class PrincipalsError(ValueError):
    """The principals file cannot be used; the message names the file and line."""

    def __init__(self, message: str, *, path: str = "", line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}" if where else message)
        self.path = path
        self.line = line


class Match(BaseModel):
    """What a token must carry to be this principal's (every key given must hold)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sub: str | None = None
    client_id: str | None = None
    groups: str | None = None
    """One group name; the token's group claim (a list or a string) must contain it."""
    token_sha256: str | None = None
    """The lowercase hex SHA-256 of a static bearer token (``printf %s TOKEN | sha256sum``)."""

    @field_validator("sub", "client_id", "groups")
    @classmethod
    def _not_empty(cls, value: str | None) -> str | None:
        if value is not None and not value:
            raise ValueError("must not be empty")
        return value

    @field_validator("token_sha256")
    @classmethod
    def _hex(cls, value: str | None) -> str | None:
        if value is not None and not _HEX64.match(value):
            raise ValueError("must be 64 lowercase hex digits (the SHA-256 of the token, "
                             "e.g. printf %s \"$TOKEN\" | sha256sum), never the token itself")
        return value

    @model_validator(mode="after")
    def _something(self) -> Match:
        if not any((self.sub, self.client_id, self.groups, self.token_sha256)):
            raise ValueError("needs at least one of sub, client_id, groups, token_sha256 "
                             "(an empty match would let every token in)")
        return self


class Principal(BaseModel):
    """One ``[[principal]]`` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    match: Match
    root: str
    scopes: tuple[Scope, ...] | None = None
    read_only: bool | None = None
    deny: tuple[str, ...] = Field(default=())
    on_stale: Literal["refuse", "merge"] | None = None
    """``None``: the server's ``--on-stale``."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("must be 1 to 64 letters, digits, '.', '_' or '-', starting "
                             "with a letter or digit")
        return value

    @field_validator("root")
    @classmethod
    def _root(cls, value: str) -> str:
        if value == ".":
            return ""
        segments = value.split("/")
        bad = (not value or value.startswith("/") or "\\" in value or "\x00" in value
               or ":" in value or any(s in ("", ".", "..") for s in segments))
        if bad:
            raise ValueError("must be a relative path inside the server's root, e.g. "
                             "\"teams/alice\" (\".\" for the whole root), without '..', '.', "
                             f"empty segments, backslashes or a URL scheme; got {value!r}")
        return value

    @model_validator(mode="after")
    def _access(self) -> Principal:
        if (self.scopes is None) == (self.read_only is None):
            raise ValueError("give exactly one of scopes = [\"files:read\", ...] or "
                             "read_only = true")
        if self.scopes is not None and "files:read" not in self.scopes:
            raise ValueError("scopes must include files:read (a change needs a read first)")
        return self

    @property
    def writable(self) -> bool:
        """Whether this principal may change files (``files:write``, not read-only)."""
        return bool(self.scopes and "files:write" in self.scopes and not self.read_only)

    def tools(self, offered: Iterable[str]) -> tuple[str, ...]:
        """The tools of ``offered`` this principal is offered."""
        return tuple(t for t in offered if self.writable or t not in WRITE_TOOLS)

    def matches(self, claims: Mapping[str, Any], *, client_id: str | None,
                subject: str | None, token_sha256: str | None,
                groups_claim: str = "groups") -> bool:
        """Whether a token with these claims is this principal's."""
        m = self.match
        if m.sub is not None and m.sub != subject:
            return False
        if m.client_id is not None and m.client_id != client_id:
            return False
        if m.groups is not None:
            groups = claims.get(groups_claim)
            names = [groups] if isinstance(groups, str) else groups if isinstance(
                groups, list) else []
            if m.groups not in names:
                return False
        return m.token_sha256 is None or m.token_sha256 == token_sha256


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    principal: list[Principal] = Field(min_length=1)


class Principals:
    """The principals of a file, in file order."""

    def __init__(self, principals: Iterable[Principal], *, groups_claim: str = "groups",
                 source: str = "") -> None:
        self.principals = tuple(principals)
        self.groups_claim = groups_claim
        self.source = source
        self.by_name = {p.name: p for p in self.principals}

    def static_hashes(self) -> dict[str, str]:
        """``{token_sha256: principal name}`` of the principals matched by static tokens."""
        return {p.match.token_sha256: p.name for p in self.principals
                if p.match.token_sha256 is not None}

    def scopes(self) -> dict[str, tuple[str, ...]]:
        """Each principal's scopes as a token would carry them (``read_only``:
        ``files:read``)."""
        return {p.name: ("files:read", "files:write") if p.writable else ("files:read",)
                for p in self.principals}

    def match(self, claims: Mapping[str, Any], *, client_id: str | None,
              subject: str | None, token_sha256: str | None) -> Principal | None:
        """The first principal whose ``match`` the token satisfies, or ``None``."""
        for p in self.principals:
            if p.matches(claims, client_id=client_id, subject=subject,
                         token_sha256=token_sha256, groups_claim=self.groups_claim):
                return p
        return None

    def __len__(self) -> int:
        return len(self.principals)


def load_principals(path: str | Path, *, groups_claim: str = "groups") -> Principals:
    """Read and validate a principals file (raises :class:`PrincipalsError`)."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PrincipalsError(f"cannot read the principals file: {exc}", path=name) from None
    return parse_principals(text, source=name, groups_claim=groups_claim)


def parse_principals(text: str, *, source: str = "principals.toml",
                     groups_claim: str = "groups") -> Principals:
    """:func:`load_principals` of a file's text."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None) or _line_of_message(str(exc))
        raise PrincipalsError(f"not valid TOML: {getattr(exc, 'msg', exc)}", path=source,
                              line=line) from None
    tables = _table_lines(text)
    unknown = [k for k in data if k != "principal"]
    if unknown:
        line, _ = _locate(text, tables, (unknown[0],), data)
        raise PrincipalsError(f"{unknown[0]}: unknown key (the file holds [[principal]] "
                              "tables only)", path=source, line=line)
    try:
        parsed = _File.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = error["loc"]
        line, where = _locate(text, tables, loc, data)
        field = ".".join(str(p) for p in loc[2:] if not isinstance(p, int))
        field = field or ("principal" if len(loc) < 2 else "")
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        elif error["type"] == "missing":
            message = "missing"
        shown = f"{field}: " if field else ""
        raise PrincipalsError(f"{where}{shown}{message}", path=source, line=line) from None
    seen: dict[str, int] = {}
    for index, p in enumerate(parsed.principal):
        if p.name in seen:
            raise PrincipalsError(
                f"[[principal]] #{index + 1}: the name {p.name!r} is used twice (first by "
                f"#{seen[p.name] + 1})", path=source, line=_key_line(text, tables, index, "name"))
        seen[p.name] = index
    hashes: dict[str, int] = {}
    for index, p in enumerate(parsed.principal):
        h = p.match.token_sha256
        if h is not None:
            if h in hashes:
                raise PrincipalsError(
                    f"[[principal]] #{index + 1} ({p.name!r}): the same token_sha256 as "
                    f"#{hashes[h] + 1}", path=source, line=_key_line(text, tables, index, "match"))
            hashes[h] = index
    return Principals(parsed.principal, groups_claim=groups_claim, source=source)


_TABLE = re.compile(r"^\s*\[\[\s*principal\s*\]\]")


def _table_lines(text: str) -> list[int]:
    """The 1-based line of each ``[[principal]]`` header, in order."""
    return [n for n, line in enumerate(text.splitlines(), 1) if _TABLE.match(line)]


def _key_line(text: str, tables: list[int], index: int, key: str) -> int | None:
    """The line of ``key = ...`` in the ``index``-th table (else the table's header)."""
    if index >= len(tables):
        return None
    lines = text.splitlines()
    end = tables[index + 1] - 1 if index + 1 < len(tables) else len(lines)
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*[=.]")
    for n in range(tables[index], end + 1):
        if pattern.match(lines[n - 1]):
            return n
    return tables[index]


def _locate(text: str, tables: list[int], loc: tuple[int | str, ...],
            data: dict[str, Any]) -> tuple[int | None, str]:
    """The line and a "[[principal]] #n ('name'): " prefix of a validation error."""
    if len(loc) < 2 or loc[0] != "principal" or not isinstance(loc[1], int):
        if loc and loc[0] != "principal":  # an unknown top-level key
            pattern = re.compile(rf"^\s*\[?\[?\s*{re.escape(str(loc[0]))}\b")
            line = next((n for n, t in enumerate(text.splitlines(), 1) if pattern.match(t)),
                        None)
            return line, f"{loc[0]}: "
        return (tables[0] if tables else 1), "expected one or more [[principal]] tables; "
    index = loc[1]
    entries = data.get("principal")
    name = (entries[index].get("name") if isinstance(entries, list) and index < len(entries)
            and isinstance(entries[index], dict) else None)
    shown = f" ({name!r})" if isinstance(name, str) else ""
    if len(loc) < 3:  # the table as a whole (which keys go together): its header
        line = tables[index] if index < len(tables) else None
        return line, f"[[principal]] #{index + 1}{shown}: "
    return _key_line(text, tables, index, str(loc[2])), f"[[principal]] #{index + 1}{shown}: "


def _line_of_message(message: str) -> int | None:
    found = re.search(r"line (\d+)", message)
    return int(found.group(1)) if found else None
