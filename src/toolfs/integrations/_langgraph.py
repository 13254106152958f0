"""Which agent a LangChain/LangGraph call comes from (for the ``langchain`` and
``deepagents`` adapters; needs only ``langchain_core``)."""

from __future__ import annotations

from toolfs.errors import missing_extra

try:
    from langchain_core.runnables.config import ensure_config
except ImportError as exc:
    raise missing_extra("langchain", "toolfs's LangGraph support", exc) from exc


def agent_key() -> tuple[str, str] | None:
    """``(conversation, subagent run)`` of the call being made, or ``None`` for the
    adapter's own context (a run with no ``thread_id`` and not in a subagent, or a call
    outside any run).

    The conversation is LangGraph's ``thread_id``: a server runs many conversations of
    one compiled agent at once, each its own agent. Deep Agents runs a subagent inside
    the parent's ``task`` tool call with ``ls_agent_type="subagent"`` in its config;
    LangGraph's checkpoint namespace of a call in it is ``<parent's task call>|<the
    subagent's own step>``, so the namespace without its last segment names that
    subagent run, the same for all its steps and different for every ``task`` call
    (parallel ones included). The config is LangChain's context variable, set for the
    tool or node being run (also in the worker thread a sync tool runs on)."""
    configurable = ensure_config().get("configurable") or {}
    thread = configurable.get("thread_id")
    run = ""
    if configurable.get("ls_agent_type") == "subagent":
        run = str(configurable.get("checkpoint_ns") or "").rpartition("|")[0]
    if thread is None and not run:
        return None
    return ("" if thread is None else str(thread), run)
