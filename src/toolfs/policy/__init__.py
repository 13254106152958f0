"""The policy: a wrapper filesystem, its ledger, its rules and its events."""

from toolfs.policy.events import AuditLog, FsEvent, Subscriber, Veto
from toolfs.policy.filesystem import PolicyFileSystem
from toolfs.policy.handles import ObservedFile, PendingWrite
from toolfs.policy.ledger import Ledger, LedgerSnapshot, Observation
from toolfs.policy.observe_commit import Commit
from toolfs.policy.paths import Jail, Target
from toolfs.policy.rules import Policy

__all__ = [
    "AuditLog", "Commit", "FsEvent", "Jail", "Ledger", "LedgerSnapshot", "Observation",
    "ObservedFile", "PendingWrite", "Policy", "PolicyFileSystem", "Subscriber", "Target", "Veto",
]
