"""``toolfs serve`` for many remote agents: contexts without sessions, shared ledgers for
replicas (and, from issue 38, OAuth, principals and audit)."""
