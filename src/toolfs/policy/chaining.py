"""How fsspec makes a :class:`~toolfs.policy.PolicyFileSystem` from a URL.

``toolfs`` is registered with fsspec (the ``fsspec.specs`` entry point), so
``toolfs::s3://bucket/prefix/sales.csv`` works wherever fsspec URLs do (pandas, Polars,
PyArrow, Dask...). fsspec's chaining builds the wrapper with the wrapped filesystem
named, not given: ``target_protocol``, ``target_options`` and ``fo`` (the path of the
URL). Two rules follow from "one filesystem instance is one execution context":

* A filesystem built that way is cached by its options (``context_id`` included, ``fo``
  and the calling thread not), so every call of a notebook with the same
  ``storage_options`` shares one context, one ledger: what pandas read there is what a
  later ``to_csv`` there is checked against.
* A filesystem given as an object (``PolicyFileSystem(fs, root)``, what ``Workspace``
  does) is never cached: each construction is a new context.
"""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Mapping
from typing import Any

from fsspec.config import apply_config
from fsspec.spec import AbstractFileSystem
from fsspec.utils import tokenize

from toolfs.errors import PROTOCOL_EXTRAS, fs_error, install_hint
from toolfs.policy.rules import Policy

__all__ = ["CHAINED_URLS", "ChainedBase", "OneContextPerOptions", "policy_option",
           "target_filesystem"]

try:  # fsspec >= 2025.10: url_to_fs hands a chained wrapper the path of the URL
    from fsspec.implementations.chained import ChainedFileSystem as ChainedBase
except ImportError:  # pragma: no cover - older fsspec: chained URLs give the wrapper ""
    ChainedBase = AbstractFileSystem
CHAINED_URLS = ChainedBase is not AbstractFileSystem
"""Whether this fsspec passes the path of a ``toolfs::...`` URL to the filesystem."""

_contexts_lock = threading.Lock()


class OneContextPerOptions(type(AbstractFileSystem)):  # type: ignore[misc]
    """The metaclass of :class:`~toolfs.policy.PolicyFileSystem`: instances built from
    ``target_protocol`` are cached by their options, in the class's ``_cache`` (so
    ``clear_instance_cache()`` forgets them), across threads; every other construction
    is a fresh instance (the class is not ``cachable`` for fsspec's own cache)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if (args or kwargs.get("fs") is not None or kwargs.get("target_protocol") is None
                or kwargs.get("skip_instance_cache")):
            return super().__call__(*args, **kwargs)
        kwargs = apply_config(cls, kwargs)
        # pandas retries an open refused with PermissionError (a read-only context, a
        # deny rule) with anon=True added to the first filesystem of the chain, meaning
        # "a public bucket": toolfs holds no credentials, so it is the same context, and
        # the retry meets the same refusal instead of a TypeError.
        kwargs.pop("anon", None)
        unknown = sorted(set(kwargs) - _options_of(cls))
        if unknown:
            raise fs_error("invalid_arguments", f"unknown toolfs option(s) "
                           f"{', '.join(map(repr, unknown))}; the options are "
                           f"{', '.join(sorted(_options_of(cls) - {'fs', 'store'}))}")
        # The path of the URL names a file, not the context: one notebook reading
        # a.csv and writing b.csv is one context. fsspec puts the calling thread into
        # its own tokens; one context must not split by thread either.
        # The same options in another order (url_to_fs and fsspec.filesystem order
        # them differently) are the same context.
        fo = kwargs.pop("fo", None)
        token = tokenize(cls, os.getpid(), sorted(kwargs.items()))
        with _contexts_lock:
            if getattr(cls, "_pid", None) != os.getpid():  # a forked child starts without contexts
                cls._cache.clear()
                cls._pid = os.getpid()
            instance = cls._cache.get(token)
            if instance is None:
                instance = super().__call__(fo=fo, **kwargs)
                instance._fs_token_ = token
                cls._cache[token] = instance
        return instance


def _options_of(cls: type) -> set[str]:
    """The keyword arguments ``cls`` takes (its ``__init__``'s named parameters)."""
    init = cls.__init__  # type: ignore[misc]
    return {name for name, p in inspect.signature(init).parameters.items()
            if name != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}


def target_filesystem(target_protocol: str, target_options: Mapping[str, Any] | None,
                      fo: str | None) -> AbstractFileSystem:
    """The filesystem a chained ``toolfs`` wraps, made as fsspec makes it."""
    if fo is not None and not CHAINED_URLS:  # pragma: no cover - older fsspec
        raise fs_error("unsupported", "toolfs:: URLs need fsspec 2025.10 or later; with "
                       "this fsspec use fsspec.filesystem('toolfs', target_protocol=..., "
                       "target_options=...) and the target's own paths")
    from fsspec.registry import filesystem  # the registry imports implementations lazily

    if target_options is not None and not isinstance(target_options, Mapping):
        raise fs_error("invalid_arguments", "target_options must be a mapping of the "
                       f"{target_protocol} filesystem's options")
    try:
        made: AbstractFileSystem = filesystem(target_protocol, **dict(target_options or {}))
    except (ImportError, ValueError) as exc:
        extra = PROTOCOL_EXTRAS.get(target_protocol) if isinstance(exc, ImportError) else None
        hint = f"; {install_hint(extra)}" if extra else ""
        raise fs_error("invalid_arguments",
                       f"cannot open the {target_protocol} filesystem: {exc}{hint}") from exc
    return made


def policy_option(value: Any) -> Policy | None:
    """``policy`` as a ``Policy``, ``None`` (rules off) or a mapping of ``Policy``'s
    fields (``{"require_observation": False}``: storage options often come from
    configuration files, which cannot hold a ``Policy``)."""
    if value is None or isinstance(value, Policy):
        return value
    if isinstance(value, Mapping):
        fields = set(Policy.__dataclass_fields__)
        wrong = sorted(set(value) - fields) or [
            k for k, v in value.items()
            if isinstance(Policy.__dataclass_fields__[k].default, bool) != isinstance(v, bool)]
        if not wrong:
            try:
                return Policy(**value)
            except (TypeError, ValueError) as exc:
                wrong = [str(exc)]
        raise fs_error("invalid_arguments", f"policy takes {', '.join(sorted(fields))}; "
                       f"got {dict(value)!r} ({', '.join(map(str, wrong))})")
    raise fs_error("invalid_arguments", "policy must be a toolfs.Policy, None or a mapping "
                   f"such as {{'require_observation': False}}; got {type(value).__name__}")
