"""``toolfs serve`` for many remote agents: OAuth 2.1 resource server (:mod:`.auth`), a
room per principal (:mod:`.principals`), an audit trail with the principal
(:mod:`.audit`), and contexts without sessions, whose observations a shared ledger keeps
for replicas (:mod:`.contexts`). The MCP wiring is :mod:`toolfs.integrations.mcp_server`;
the operator's guide is docs/server.md."""
