"""``toolfs serve`` for many remote agents: OAuth 2.1 resource server (:mod:`.auth`), a
room per principal (:mod:`.principals`) and an audit trail with the principal
(:mod:`.audit`). The MCP wiring is :mod:`toolfs.integrations.mcp_server`, whose contexts
without sessions and shared ledgers for replicas are :mod:`toolfs.integrations._mcp_contexts`
and :mod:`toolfs.policy.shared_ledger`; the operator's guide is docs/server.md."""
