"""The observation rules, and deny globs.

=================================  ====================================================
situation                          outcome of write / edit / delete
=================================  ====================================================
file absent, never observed        write: create-only put; edit/delete: ``not_found``
file exists, never observed        ``not_observed`` (read it first)
observed at V, still at V          conditional put on V: succeeds, observation -> new V
observed at V, now at W != V       ``stale`` with the diff V -> W (see below); with
                                   ``on_stale="merge"``, merged onto W when the two
                                   changes do not overlap or touch
observed at V, deleted since       ``stale``
observed absent, created since     ``stale`` with the new file as the diff
policy off (``policy=None``)       write: create-or-overwrite; edit: fresh read, put on
                                   the version just read
=================================  ====================================================

A successful write or edit records its own new version, so chains of edits need no
re-read; any read, even a window, records the version of the bytes it returned. A
``stale`` refusal that shows the whole diff since the observation (this context still
held the observed bytes, and the diff fit its budget) records the current version too:
the model has seen every line that changed, so its next call needs no read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

OnStale = Literal["refuse", "merge"]


@dataclass(frozen=True)
class Policy:
    """Switches of the observation policy (the defaults are the safe ones)."""

    require_observation: bool = True
    """Updating an existing file needs a prior observation in this context."""
    on_stale: OnStale = "refuse"
    """What a change made from an outdated version does. ``"refuse"``: it is ``stale``,
    with the diff of what changed since (see docs/policy.md). ``"merge"``: it lands on
    the current version when it does not overlap or touch the other change (an ``edit``
    whose matched lines were left untouched; a ``write`` by a three-way line merge),
    and is ``stale`` with the diff otherwise. Either way the commit is conditional on
    the version it was merged with: no update is ever lost."""

    def __post_init__(self) -> None:
        if self.on_stale not in ("refuse", "merge"):
            raise ValueError(f"on_stale must be 'refuse' or 'merge', not {self.on_stale!r}")


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
