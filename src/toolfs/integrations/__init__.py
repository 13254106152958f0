"""Integrations: the ``toolfs`` command line, the MCP server, the pytest plugin, the demo.

Nothing here is imported by ``import toolfs``; each module imports its optional
dependency (``mcp``) only when used.
"""
