"""Valid Unicode out: every string that leaves toolfs must encode as UTF-8.

File names on local disk are bytes; Python hands undecodable ones over as lone
surrogates (``caf\\udce9.txt``), which JSON encoders, MCP transports and terminals
refuse. Such a name is shown with a visible escape (``caf\\udce9.txt``, backslash
included) rather than dropped or replaced by ``?``, so a person can still tell which
file it is. Names the model sends back with a lone surrogate are refused at the door
(``invalid_arguments``), so an escaped name never round-trips into a different file.
"""

from __future__ import annotations

from typing import Any


def escape_undecodable(text: str) -> str:
    """``text`` with each lone surrogate written as a visible ``\\udcXX`` escape."""
    if text.isascii():  # O(1) in CPython: the string knows it is ASCII
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def escape_undecodable_data(value: Any) -> Any:
    """A copy of JSON-like ``value`` with :func:`escape_undecodable` applied to every
    string, keys included; values that need no change are returned as they are."""
    if isinstance(value, str):
        return escape_undecodable(value)
    if isinstance(value, dict):
        return {escape_undecodable(k) if isinstance(k, str) else k: escape_undecodable_data(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        if value and type(value[0]) is str:
            try:
                joined = "".join(value)  # a TypeError unless every item is a str
            except TypeError:
                pass
            else:
                if _valid(joined):
                    # A list of clean strings (a read's lines): one check in C, not one
                    # per item.
                    return list(value)
        return [escape_undecodable_data(v) for v in value]
    return value


def _valid(text: str) -> bool:
    return text.isascii() or not has_lone_surrogate(text)


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (it cannot be stored or sent as UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
