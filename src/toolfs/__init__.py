"""toolfs: read, write and edit tools for AI agents over any fsspec filesystem.

    ws = toolfs.Workspace("memory://proj")
    ws.write("a.py", "x = 1\n")
    ws.edit("a.py", "x = 1", "x = 2")
"""

from toolfs.errors import ERROR_CODES, FsError
from toolfs.policy import AuditLog, FsEvent, LedgerSnapshot, Policy, PolicyFileSystem, Veto
from toolfs.results import EditResult, ReadResult, ToolOutput, WriteResult
from toolfs.schemas import EditArgs, ReadArgs, WriteArgs, tool_definitions
from toolfs.versions import FileVersion
from toolfs.workspace import AsyncWorkspace, Workspace

__version__ = "0.1.0"

__all__ = [
    "ERROR_CODES", "AsyncWorkspace", "AuditLog", "EditArgs", "EditResult", "FileVersion",
    "FsError", "FsEvent", "LedgerSnapshot", "Policy", "PolicyFileSystem", "ReadArgs",
    "ReadResult", "ToolOutput", "Veto", "Workspace", "WriteArgs", "WriteResult",
    "tool_definitions",
]
