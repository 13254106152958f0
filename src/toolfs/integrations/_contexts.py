"""One execution context per agent of a framework object that serves many.

A framework's agent object (a pydantic-ai ``Agent``, a compiled LangGraph graph) is
built once and serves many conversations, and Deep Agents hands its subagents the
parent's backend. Each of those is its own agent and must be its own toolfs execution
context, or one conversation's update is stored over another's change (its context
"observed" the other's write). :class:`AgentContexts` derives them from the workspace
the adapter was given.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

from toolfs.policy.events import FsEvent, Subscriber
from toolfs.workspace import AsyncWorkspace, Workspace

W = TypeVar("W", Workspace, AsyncWorkspace)

_log = logging.getLogger(__name__)

# Events a subscriber may refuse (its error refuses the operation); the others are
# after the fact, and one subscriber's error must not keep the event from the rest.
_BEFORE = frozenset({"fs/read", "fs/write-intent"})


class AgentContexts(Generic[W]):
    """Execution contexts derived from ``root`` (a Workspace, or an AsyncWorkspace whose
    derived contexts share its worker threads), one per key, made on first use.

    Each derived context sends its events to ``root``'s subscribers as they are at the
    time of the event (its audit log, and hooks subscribed later too: a veto on
    ``root`` holds for every agent). Memory is bounded: at most ``limit`` contexts are
    kept, each caching at most ``cache_bytes`` of observed content (a smaller cache only
    costs a re-fetch when an edit follows a read), so ``limit * cache_bytes`` at most;
    the least recently used context beyond ``limit`` is dropped (an agent long done). A
    dropped one that comes back starts afresh: its updates are refused ``not_observed``
    until it reads again, never stored blind.
    """

    def __init__(self, root: W, *, limit: int = 256,
                 cache_bytes: int = 1024 * 1024) -> None:
        self.root: W = root
        self.limit = limit
        self.cache_bytes = cache_bytes
        self._contexts: OrderedDict[Hashable, W] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> W:
        """The context of ``key``."""
        with self._lock:
            ws = self._contexts.get(key)
            if ws is not None:
                self._contexts.move_to_end(key)
                return ws
            sync = self.root.sync if isinstance(self.root, AsyncWorkspace) else self.root
            made: W = self.root.new_context(
                subscribers=[_forwarder(sync)],
                cache_bytes=min(self.cache_bytes, sync.fs.ledger.cache_bytes))
            self._contexts[key] = made
            while len(self._contexts) > self.limit:
                self._contexts.popitem(last=False)
            return made

    def __len__(self) -> int:
        with self._lock:
            return len(self._contexts)


def _forwarder(root: Workspace) -> Subscriber:
    def forward(event: FsEvent) -> None:
        for subscriber in list(root.fs.subscribers):
            if event.type in _BEFORE:
                subscriber(event)  # a veto or failure refuses the operation
                continue
            try:
                subscriber(event)
            except Exception:  # after the fact: the rest still get it
                _log.exception("toolfs event subscriber failed on %s", event.type)
    return forward
