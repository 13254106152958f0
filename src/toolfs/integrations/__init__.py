"""Integrations: the ``toolfs`` command line, the MCP server, the pytest plugin, the demo,
and one adapter per tool shape or agent framework:

* :mod:`toolfs.integrations.anthropic`: ``TextEditor``, ``MemoryTool``, ``beta_tools``
* :mod:`toolfs.integrations.openai`: ``ApplyPatchEditor``, ``apply_patch``
* :mod:`toolfs.integrations.openai_agents`: ``function_tools``
* :mod:`toolfs.integrations.pydantic_ai`: ``toolset``
* :mod:`toolfs.integrations.langchain`: ``tools``
* :mod:`toolfs.integrations.deepagents`: ``ToolfsBackend``

Each imports its framework (an optional extra) only when the adapter module itself is
imported; nothing in the core imports this package's modules.
"""
