"""Undo and review: the journal of a context's changes, checkpoints, rewind, and the
all-or-nothing commit of several files (:mod:`toolfs.undo.atomic`) they stand on.

Layer: above the policy, search and tools; below the workspace (docs/policy.md,
"Undo and forks")."""
