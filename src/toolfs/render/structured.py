"""Structured content within the budget: a result or an error as JSON-safe data that
holds no more than its text shows, and stays within the budget once written as JSON.

:func:`toolfs.render.structured_content` (what ``ToolOutput.to_dict`` returns) takes the
part of a result its text shows from the views (:mod:`toolfs.render.views`); the
functions here cut that data further where JSON's escapes would take it over the budget
(:func:`_fit_json`, :func:`_fit_error_json`), and bound an error's details
(:func:`_error_data`). Kept apart because measuring JSON is its own craft, with its own
fast paths, and none of it touches the text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any

from toolfs.errors import FsError
from toolfs.render.lines import _clip, _clip_line, _clip_message, _Limits
from toolfs.render.views import _glob_view, _grep_view, _ls_view
from toolfs.results import GlobResult, GrepResult, ListResult


def _bounded(value: Any, listed: int, chars: int) -> tuple[Any, bool]:
    """JSON-like ``value`` with lists cut to ``listed`` items and strings to ``chars``,
    and whether anything was cut."""
    if isinstance(value, str):
        return _clip(value, chars), len(value) > chars
    if isinstance(value, dict):
        out, cut = {}, False
        for k, v in value.items():
            out[k], c = _bounded(v, listed, chars)
            cut = cut or c
        return out, cut
    if isinstance(value, list | tuple):
        items = [_bounded(v, listed, chars) for v in value[:listed]]
        return [v for v, _ in items], len(value) > listed or any(c for _, c in items)
    return value, False


def _error_data(e: FsError, limits: _Limits) -> dict[str, Any]:
    """``e.to_dict()`` clipped as the text is; ``details`` fits in what is left. A
    ``stale`` refusal's diff is kept as the text shows it (whole when complete)."""
    message = _clip_message(e.message, limits.message)
    path = None if e.path is None else _clip(e.path, limits.path)
    room = limits.total - len(message) - len(path or "") - 200
    facts = e.details
    diff = facts.get("diff")
    if isinstance(diff, str):
        facts = {k: v for k, v in facts.items() if k != "diff"}
        room -= len(diff)
    listed, chars = limits.listed, limits.path
    while True:
        details, cut = _bounded(facts, listed, chars)
        if listed <= 1 or len(json.dumps(details, ensure_ascii=False)) <= room:
            break
        listed, chars = listed // 2, max(chars // 2, 20)
    if isinstance(diff, str):
        details["diff"] = diff
    if cut:
        details["truncated"] = True
    return {"code": e.code, "message": message, "path": path, "details": details}


# The list each structured result can hold many of: an item's strings, and what JSON
# adds to an item at most besides their escapes (a string's quotes and the ", " after it;
# an object's keys, numbers and punctuation).
_LISTED_STRINGS: dict[str, tuple[Callable[[Any], str] | None, int]] = {
    "lines": (None, 4), "paths": (None, 4), "files": (None, 4),  # lists of strings
    "counts": (None, 30),  # its paths (the dict's keys)
    "matches": (lambda m: m["path"] + m["text"], 80),
    "entries": (lambda e: e["name"], 80),
}
_LISTS = ("lines", "matches", "counts", "paths", "entries", "files")
# The bytes JSON escapes: control characters (up to six characters each), '"' and '\'.
_ESCAPED_BYTES = bytes(range(32)) + b'"\\'


def _fit_json(data: dict[str, Any], max_chars: int) -> None:
    """Cut (in place) the long list of ``data``'s result, and if need be its path, so
    that ``data`` written as JSON (``json.dumps(..., ensure_ascii=False)``) stays within
    ``max_chars``; ``truncated`` says so.

    No work when even six characters per character (JSON's longest escape) cannot reach
    the budget; else a count of the characters JSON escapes, in C, which settles almost
    every case; only when that leaves a doubt, the exact sizes, and a pass per item to
    find the cut when the list is too long."""
    result: dict[str, Any] = data["result"]
    key = next((k for k in _LISTS if result.get(k)), None)
    if key == "lines" and type(result["lines"][0]) is not str:
        key = None  # an edit's line numbers: a short list of numbers
    # A content or count grep's `files` are the paths of its matches or counts.
    paired = key in ("matches", "counts")
    # The other fields, loosely: their strings' characters and their other items.
    rest_chars, rest_items = 0, 0
    for k, v in result.items():
        if k == key or (paired and k == "files"):
            continue
        if type(v) is str:
            rest_chars += len(v)
        elif isinstance(v, list | dict):
            rest_items += len(v)
            rest_chars += sum(len(x) for x in v if type(x) is str)
    room = max_chars - 6 * rest_chars - 80 * rest_items - 500
    items: list[Any] = []
    if key is None:
        if room >= 0:
            return
    else:
        listed = result[key]
        items = listed if type(listed) is list else list(listed)  # counts: its paths
        strings, per_item = _LISTED_STRINGS[key]
        text = "".join(items if strings is None else map(strings, items))
        room -= per_item * len(items)
        copies = 2 if paired else 1
        if 6 * copies * len(text) <= room:
            return
        raw = text.encode("utf-8", "surrogatepass")
        escaped = len(raw) - len(raw.translate(None, _ESCAPED_BYTES))
        if copies * (len(text) + 5 * escaped) <= room:
            return
    empty: dict[str, Any] = {} if key is None else {key: {} if key == "counts" else []}
    if paired:
        empty["files"] = []
    rest = len(json.dumps({**data, "result": {**result, **empty}}, ensure_ascii=False))
    if rest > max_chars and isinstance(result.get("path"), str):
        result["path"] = _json_clip(result["path"], rest - max_chars)
        result["truncated"] = True
        rest = len(json.dumps({**data, "result": {**result, **empty}}, ensure_ascii=False))
    if key is None:
        return
    room = max_chars - rest
    size, keep = 0, 0
    seen: set[str] = set()
    values = result[key]
    for item in items:
        if key == "counts":
            size += _json_size(item) + 4 + len(str(values[item]))  # "p": n and ", "
        else:
            size += _json_size(item) + 2  # with the ", " that joins it to the next
        path = item if key == "counts" else item["path"] if paired else None
        if path is not None and path not in seen:
            seen.add(path)
            size += _json_size(path) + 2
        if size > room + 2:  # the last item has no ", " after it
            break
        keep += 1
    if keep == len(items):
        return
    kept = items[:keep]
    result[key] = {p: values[p] for p in kept} if key == "counts" else kept
    result["truncated"] = True
    if key == "lines":
        result["line_count"] = keep
        result["partial"] = True
    elif key == "matches":  # the files of the matches kept
        result["files"] = list(dict.fromkeys(m["path"] for m in kept))
    elif key == "counts":
        result["files"] = kept


def _fit_error_json(data: dict[str, Any], max_chars: int) -> None:
    """Shorten (in place) an error's message, then drop its details and shorten its
    path, until ``data`` written as JSON fits in ``max_chars`` (errors are small: one
    exact measure, usually the only one)."""
    error: dict[str, Any] = data["error"]
    for step in ("message", "details", "path"):
        over = len(json.dumps(data, ensure_ascii=False)) - max_chars
        if over <= 0:
            return
        if step == "details":
            error["details"] = {}
        elif isinstance(error.get(step), str):
            error[step] = _json_clip(error[step], over)


def _json_clip(text: str, over: int) -> str:
    """``text`` cut, with "..." at the end, so that JSON writes it in at least ``over``
    characters fewer: the longest prefix that does, found by halving."""
    budget = len(encode_basestring(text)) - 2 - over - 3
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(encode_basestring(text[:mid])) - 2 <= budget:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] + "..."


def _json_size(value: Any) -> int:
    """``len(json.dumps(value, ensure_ascii=False))``; for a list of strings, one C pass
    over their text joined by NULs (each written as six characters where the list has the
    four of ``", "``)."""
    if isinstance(value, str):
        return len(encode_basestring(value))
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        if not value:
            return 2
        return len(encode_basestring("\x00".join(value))) - 2 * len(value) + 4
    return len(json.dumps(value, ensure_ascii=False))


def _discovery_view(value: GlobResult | GrepResult | ListResult, max_chars: int,
                    limits: _Limits) -> GlobResult | GrepResult | ListResult:
    """The part of a glob, grep or ls result its text shows."""
    if isinstance(value, GlobResult):
        _, rows = _glob_view(value, max_chars)
        return value.model_copy(update={"paths": rows,
                                        "truncated": value.truncated or
                                        len(rows) < len(value.paths)})
    if isinstance(value, ListResult):
        _, n = _ls_view(value, max_chars)
        entries = [e.model_copy(update={"name": _clip(e.name, limits.path)})
                   for e in value.entries[:n]]
        return value.model_copy(update={"path": _clip(value.path, limits.path),
                                        "entries": entries,
                                        "truncated": value.truncated or n < len(value.entries)})
    _, n = _grep_view(value, max_chars)
    cut = value.truncated
    if value.mode == "files_with_matches":
        files = [_clip(p, limits.path) for p in value.files[:n]]
        return value.model_copy(update={"files": files,
                                        "truncated": cut or n < len(value.files)})
    if value.mode == "count":
        items = list(value.counts.items())[:n]
        counts = {_clip(p, limits.path): c for p, c in items}
        return value.model_copy(update={"files": list(counts), "counts": counts,
                                        "truncated": cut or n < len(value.counts)})
    matches = [m.model_copy(update={"path": _clip(m.path, limits.path),
                                    "text": _clip_line(m.text, limits.line, m.chars)})
               for m in value.matches[:n]]
    files = list(dict.fromkeys(m.path for m in matches))
    return value.model_copy(update={"files": files, "matches": matches,
                                    "truncated": cut or n < len(value.matches)})
