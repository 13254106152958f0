"""Redaction of credentials (storage options, bearer tokens) from text that leaves toolfs.

A :class:`Redactor` built from a workspace's storage options masks their secret values in
every error message the workspace returns, and the CLI and MCP server apply one to all
they print, log or send.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

# Storage options whose name matches this carry credentials (key, secret, token,
# session_token, password, client_secret, credentials, ...; adlfs's connection_string
# holds the account key).
_SENSITIVE_NAME = re.compile(r"key|secret|token|passw|credential|session|auth|conn_?str|"
                             r"connection_?string", re.IGNORECASE)
# scheme://user:password@host
_URL_PASSWORD = re.compile(r"(://[^/:@\s]+):[^@/\s]+@")
# Shorter values are not credentials and masking them would garble ordinary text.
_MIN_SECRET_LEN = 4
# Values of credential-named options that select a mode rather than carry a secret
# (gcsfs ``token="anon"``, ``"google_default"``; ``anon=True`` elsewhere).
_NOT_SECRETS = frozenset({"anon", "anonymous", "google_default", "cache", "cloud",
                          "browser", "true", "false", "none", "null"})
# How deep an exception chain is rewritten (chains can be cyclic through __context__).
_MAX_CHAIN = 32


class RedactedError(Exception):
    """Stands in, in an exception chain, for a foreign exception whose text held a
    credential: it keeps the original's type name and its message with the secret
    masked, so a printed traceback says what failed without leaking anything."""


def is_credential_name(name: str) -> bool:
    """Whether a storage option called ``name`` holds a credential (key, token, ...)."""
    return bool(_SENSITIVE_NAME.search(name))


class Redactor:
    """Masks known secret strings (credentials, bearer tokens) as ``***`` in text.

    Used on everything the CLI and the MCP server print, log or return, so a credential
    passed as a storage option cannot leak through an exception message.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is masked whole.
        self.secrets = sorted({s for s in secrets if len(s) >= _MIN_SECRET_LEN
                               and s.lower() not in _NOT_SECRETS},
                              key=len, reverse=True)

    @classmethod
    def for_options(cls, options: Mapping[str, Any], *extra: str | None) -> Redactor:
        """A redactor for the credential-like values in ``options`` (nested too), plus ``extra``."""
        found = [s for s in extra if s]

        def walk(value: Any, sensitive: bool) -> None:
            if isinstance(value, Mapping):
                for k, v in value.items():
                    walk(v, sensitive or is_credential_name(str(k)))
            elif isinstance(value, list | tuple):
                for v in value:
                    walk(v, sensitive)
            elif sensitive and isinstance(value, str):
                found.append(value)

        walk(options, False)
        return cls(found)

    def __call__(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text

    def message(self, text: str) -> str:
        """Like calling the redactor, and also masks passwords in URLs
        (``scheme://user:***@host``); for logs and error lines, not file content."""
        return _URL_PASSWORD.sub(r"\1:***@", self(text))

    def chain(self, exc: BaseException) -> None:
        """Mask secrets in the causes of ``exc`` (its own message is the caller's): each
        cause or context whose text holds a secret is replaced by a
        :class:`RedactedError` carrying the masked text."""
        if not self.secrets:
            return
        seen: set[int] = set()
        node: BaseException = exc
        for _ in range(_MAX_CHAIN):
            seen.add(id(node))
            nxt = node.__cause__ or (None if node.__suppress_context__ else node.__context__)
            if nxt is None or id(nxt) in seen:
                return
            text = f"{nxt}"
            clean = self.message(text)
            if clean != text or self.message(repr(nxt)) != repr(nxt):
                stand_in = RedactedError(
                    f"{type(nxt).__module__}.{type(nxt).__qualname__}: {clean}")
                stand_in.__cause__ = nxt.__cause__ or (
                    None if nxt.__suppress_context__ else nxt.__context__)
                stand_in.__suppress_context__ = True
                node.__cause__ = stand_in
                node.__suppress_context__ = True
                nxt = stand_in
            node = nxt

    def data(self, value: Any) -> Any:
        """A copy of JSON-like ``value`` with every string redacted."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, Mapping):
            return {k: self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value

    def log_filter(self) -> logging.Filter:
        """A filter for a log handler that redacts each record's formatted message."""
        redact = self

        class _Filter(logging.Filter):
            def filter(self, record: logging.LogRecord) -> bool:
                record.msg, record.args = redact.message(record.getMessage()), None
                if record.exc_info:
                    # Tracebacks quote exception messages. Formatters reuse a cached
                    # exc_text, so caching the redacted text is what gets printed.
                    text = record.exc_text or logging.Formatter().formatException(
                        record.exc_info)
                    record.exc_text = redact.message(text)
                if record.stack_info:
                    record.stack_info = redact.message(record.stack_info)
                return True

        return _Filter()
