"""The observation rules, and deny globs.

=================================  ====================================================
situation                          outcome of write / edit / delete
=================================  ====================================================
file absent, never observed        write: create-only put; edit/delete: ``not_found``
file exists, never observed        ``not_observed`` (read it first)
observed at V, still at V          conditional put on V: succeeds, observation -> new V
observed at V, now at W != V       ``stale`` (read it again)
observed at V, deleted since       ``stale``
observed absent, created since     ``stale``
policy off (``policy=None``)       write: create-or-overwrite; edit: fresh read, put on
                                   the version just read
=================================  ====================================================

A successful write or edit records its own new version, so chains of edits need no
re-read; any read, even a window, records the version of the bytes it returned.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Policy:
    """Switches of the observation policy (the defaults are the safe ones)."""

    require_observation: bool = True
    """Updating an existing file needs a prior observation in this context."""


def _glob_regex(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        out.append({"*": "[^/]*", "?": "[^/]"}.get(c, re.escape(c)))
        i += 1
    return "".join(out)


def deny_matcher(patterns: tuple[str, ...], *,
                 fold_case: bool = False) -> Callable[[str], bool]:
    """A predicate over root-relative paths, with gitignore-like globs.

    ``*`` and ``?`` stay within a segment, ``**`` crosses segments; a pattern without a
    ``/`` (``.env``, ``*.pem``) matches that name at any depth, and a pattern naming a
    directory (``.git/**``, ``secrets/``) covers everything below it. With ``fold_case``
    (a filesystem where ``.ENV`` opens ``.env``) matching ignores case.
    """
    if not patterns:
        return lambda _path: False
    parts: list[str] = []
    for raw in patterns:
        p = raw.strip()
        if not p:
            continue
        if p.endswith("/"):
            p += "**"
        anchored = "/" in p.rstrip("/").removesuffix("/**")
        body = _glob_regex(p.lstrip("/"))
        parts.append(body if anchored else f"(?:.*/)?{body}")
        parts.append((body if anchored else f"(?:.*/)?{body}") + "/.*")
    flags = re.DOTALL | (re.IGNORECASE if fold_case else 0)
    regex = re.compile(f"^(?:{'|'.join(parts)})$", flags)
    return lambda path: bool(regex.match(path))
