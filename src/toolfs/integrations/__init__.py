"""Integrations: the ``toolfs`` command line, the MCP server, the pytest plugin, the demo.

The MCP server imports its optional dependency (``mcp``) only when it is used.
"""
