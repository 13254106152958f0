"""The ``toolfs`` command line (also ``python -m toolfs``).

* ``toolfs demo [--backend memory|local|s3]``: two agents, one file, one stale edit refused.
* ``toolfs schema [--format openai|openai_responses|anthropic|mcp|json_schema] [--strict]``:
  the tool definitions (JSON).
* ``toolfs serve URL [--tools read,grep,...]``: the MCP server, over stdio or streamable
  HTTP.
* ``toolfs glob PATTERN URL``, ``toolfs grep PATTERN URL``, ``toolfs ls URL``: discovery
  for a person at a terminal, printing what the model would read.
* ``toolfs changes URL --context ID [--journal URL] [--diff]`` and ``toolfs rewind URL
  --context ID --to CHECKPOINT [--journal URL]``: a context's persisted journal (see
  docs/policy.md, "Undo and forks"); ``--journal`` defaults to ``$TOOLFS_JOURNAL``.

Errors are printed as one line on stderr, with exit status 2 for a bad command line and 1
for a failure while running; credentials never appear in them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

from toolfs.deadline import DEFAULT_TIMEOUT
from toolfs.redact import Redactor, is_credential_name

TOKEN_ENV = "TOOLFS_TOKEN"
JOURNAL_ENV = "TOOLFS_JOURNAL"
FORMATS = ("json_schema", "openai", "openai_responses", "anthropic", "mcp")


class UsageError(Exception):
    """A bad command line: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, with errors as one line instead of usage plus a line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else 2
    redact = Redactor.for_options(dict(getattr(args, "option", [])), getattr(args, "token", None),
                                  os.environ.get(TOKEN_ENV))
    command: Callable[[argparse.Namespace], int] = args.command
    try:
        return command(args)
    except UsageError as exc:
        _fail(args, redact, str(exc))
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `toolfs schema | head`: the reader left, nothing to report
        # Point stdout at devnull so the interpreter's final flush does not fail again.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # a CLI answers with a line, not a traceback
        _fail(args, redact, str(exc) or type(exc).__name__)
        return 1


def _fail(args: argparse.Namespace, redact: Redactor, message: str) -> None:
    line = " ".join(redact.message(message).split())
    print(f"toolfs {args.name}: error: {line}", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    from toolfs import __version__

    parser = _Parser(prog="toolfs", description=(
        "read, write and edit tools for AI agents over any fsspec filesystem, with "
        "stale-write protection."))
    parser.add_argument("--version", action="version", version=f"toolfs {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", required=True,
                                parser_class=_Parser)

    demo = sub.add_parser("demo", help="watch two agents edit one file (offline)",
                          description="Two agents edit one file; the edit made from a stale "
                          "copy is refused. Prints what each agent sees.")
    demo.add_argument("--backend", choices=("memory", "local", "s3"), default="memory",
                      help="memory (default, embedded), local (a temporary directory) or s3 "
                      "(a local S3 emulator; needs the test extra)")
    demo.set_defaults(command=_demo, name="demo")

    schema = sub.add_parser("schema", help="print the tool definitions as JSON",
                            description="Print the tool definitions (read, write, edit, "
                            "glob, grep, ls).")
    schema.add_argument("--format", choices=FORMATS, default="json_schema",
                        help="the shape to print (default: json_schema)")
    schema.add_argument("--tools", type=_tool_list, default=None, metavar="LIST",
                        help="only these tools, comma-separated (default: the six file tools; "
                        "notebook_edit is offered only when named)")
    schema.add_argument("--strict", action="store_true",
                        help="strict-mode schemas: every property required, optional ones "
                        "nullable (OpenAI strict mode, the Agents SDK's default)")
    schema.set_defaults(command=_schema, name="schema")

    # Discovery for a person at a terminal: the same answers the model gets.
    glob = sub.add_parser("glob", help="list files matching a glob pattern",
                          description="Print the files under URL whose path matches "
                          "PATTERN, newest first (the glob tool).")
    glob.add_argument("pattern", metavar="PATTERN", help="e.g. '**/*.py'")
    grep = sub.add_parser("grep", help="search file contents with a regular expression",
                          description="Search the text files under URL for PATTERN (RE2 "
                          "syntax), as the grep tool does; ripgrep's output format.")
    grep.add_argument("pattern", metavar="PATTERN", help="a regular expression")
    grep.add_argument("-g", "--glob", dest="file_glob", metavar="GLOB",
                      help="only files matching GLOB (ripgrep -g semantics)")
    grep.add_argument("-i", "--ignore-case", action="store_true", help="ignore case")
    grep.add_argument("-C", "--context", type=int, default=0, metavar="N",
                      help="lines of context (content mode)")
    grep.add_argument("--mode", choices=("files_with_matches", "content", "count"),
                      default="content", help="output mode (default here: content)")
    grep.add_argument("--head-limit", type=int, default=None, metavar="N",
                      help="show at most N entries")
    ls = sub.add_parser("ls", help="list a directory",
                        description="Print the immediate children of a directory (the ls "
                        "tool).")
    for p in (glob, grep, ls):
        p.add_argument("url", metavar="URL",
                       help="fsspec URL or local path: memory://x, ./repo, s3://bucket/prefix")
        p.add_argument("--path", default=None,
                       help="a directory (or file, for grep) relative to URL")
        p.add_argument("-o", "--option", metavar="KEY=VALUE", action="append", default=[],
                       type=_storage_option, help="storage option (repeatable)")
    glob.set_defaults(command=_discover, name="glob")
    grep.set_defaults(command=_discover, name="grep")
    ls.set_defaults(command=_discover, name="ls")

    changes = sub.add_parser(
        "changes", help="list the changes a context made (its journal)",
        description="Print the changes the execution context ID committed on URL, oldest "
        "first, from its persisted journal (Workspace(..., journal=URL)).")
    changes.add_argument("--diff", action="store_true", help="print each change's diff")
    rewind = sub.add_parser(
        "rewind", help="rewind a context's changes to a checkpoint",
        description="Bring every file the context ID changed after CHECKPOINT back to its "
        "content then, all or nothing, never over someone else's change (refused with "
        "the diff of that change).")
    rewind.add_argument("--to", required=True, metavar="CHECKPOINT",
                        help="a checkpoint's id or label, or a journal position (0: "
                        "everything the context did)")
    rewind.add_argument("--on-stale", choices=("refuse", "merge"), default="refuse",
                        help="a file someone else changed since: refuse it (default), or "
                        "undo by a reverse merge when the changes do not overlap")
    for p in (changes, rewind):
        p.add_argument("url", metavar="URL",
                       help="fsspec URL or local path: memory://x, ./repo, s3://bucket/prefix")
        p.add_argument("--context", required=True, metavar="ID",
                       help="the execution context (Workspace(context_id=...))")
        p.add_argument("--journal", default=None, metavar="URL",
                       help=f"the journal's fsspec URL (default: ${JOURNAL_ENV})")
        p.add_argument("-o", "--option", metavar="KEY=VALUE", action="append", default=[],
                       type=_storage_option, help="storage option (repeatable)")
    changes.set_defaults(command=_changes, name="changes")
    rewind.set_defaults(command=_rewind, name="rewind")

    serve = sub.add_parser(
        "serve", help="serve the tools over MCP (stdio or streamable HTTP)",
        description="Serve the file tools over MCP on the filesystem at URL. Each MCP "
        "session is its own execution context.",
        epilog=f"The HTTP transport requires a bearer token: --token or ${TOKEN_ENV} (which "
        "keeps it out of the process list).")
    serve.add_argument("url", metavar="URL",
                       help="fsspec URL or local path: memory://x, ./repo, s3://bucket/prefix")
    serve.add_argument("--root", help="a sub-path of URL to confine the tools to")
    serve.add_argument("--read-only", action="store_true", help="refuse every change")
    serve.add_argument("--trust-conditions", action="store_true",
                       help="write even where the store ignores conditional writes "
                       "(checked at start on S3, GCS and Azure), accepting that "
                       "concurrent changes may be lost")
    serve.add_argument("--deny", metavar="GLOB", action="append", default=[],
                       help="refuse paths matching GLOB (gitignore style; repeatable), "
                       "e.g. --deny '.git/**' --deny .env")
    serve.add_argument("--on-stale", choices=("refuse", "merge"), default="refuse",
                       help="a change made from an outdated version: refuse it with the diff "
                       "since (default), or merge it when it does not overlap the other "
                       "change")
    serve.add_argument("-o", "--option", metavar="KEY=VALUE", action="append", default=[],
                       type=_storage_option,
                       help="storage option for the filesystem (repeatable); JSON values "
                       "(true, 3, {...}) are decoded, credentials stay strings")
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                       help="stdio (default) or streamable HTTP")
    serve.add_argument("--host", default=None,
                       help="HTTP interface to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None,
                       help="HTTP port (default: 8765; 0 picks a free one)")
    serve.add_argument("--token", help=f"HTTP bearer token, at least 16 characters "
                       f"(default: ${TOKEN_ENV})")
    serve.add_argument("--tools", type=_tool_list, default=None, metavar="LIST",
                       help="offer only these tools, comma-separated, e.g. read,grep,glob,ls "
                       "(default: the six file tools; add notebook_edit by naming it)")
    serve.add_argument("--max-sessions", type=int, default=None, metavar="N",
                       help="HTTP: most MCP sessions open at once (default: 64); each keeps "
                       "a ledger and a content cache")
    serve.add_argument("--timeout", type=_seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                       help="each tool call ends by then, every request and retry in it "
                       f"(default: {DEFAULT_TIMEOUT:g}; 'none': no deadline)")
    serve.set_defaults(command=_serve, name="serve")
    return parser


def _seconds(text: str) -> float | None:
    """``--timeout``: positive seconds, or ``none``."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {text!r}")
    return value


def _tool_list(text: str) -> tuple[str, ...]:
    """``read,grep`` -> ``("read", "grep")``, refusing unknown names."""
    from toolfs.schemas import ARGS_MODELS

    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in ARGS_MODELS]
    if not names or unknown:
        what = f"unknown tool {unknown[0]!r}" if unknown else "no tool named"
        raise argparse.ArgumentTypeError(f"{what}; the tools are {', '.join(ARGS_MODELS)}")
    return names


def _storage_option(text: str) -> tuple[str, Any]:
    """``key=value`` -> ``(key, value)``; the value is JSON-decoded unless it is a credential."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        # Do not echo the text: it may be a credential.
        raise argparse.ArgumentTypeError("expected KEY=VALUE")
    if is_credential_name(key):
        return key, raw
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


# -- commands ---------------------------------------------------------------------------


def _demo(args: argparse.Namespace) -> int:
    from toolfs.integrations.demo import run_demo

    run_demo(args.backend)
    return 0


def _schema(args: argparse.Namespace) -> int:
    from toolfs.schemas import tool_definitions

    print(json.dumps(tool_definitions(args.format, args.tools, strict=args.strict), indent=2))
    return 0


def _discover(args: argparse.Namespace) -> int:
    """``toolfs glob|grep|ls``: the tool's model text; exit 1 when it answered an error."""
    from toolfs.workspace import Workspace

    workspace = Workspace(args.url, dict(args.option) or None)
    arguments: dict[str, Any] = {} if args.path is None else {"path": args.path}
    if args.name in ("glob", "grep"):
        arguments["pattern"] = args.pattern
    if args.name == "grep":
        arguments.update(output_mode=args.mode, ignore_case=args.ignore_case,
                         context=args.context)
        if args.file_glob is not None:
            arguments["glob"] = args.file_glob
        if args.head_limit is not None:
            arguments["head_limit"] = args.head_limit
    output = workspace.execute(args.name, arguments)
    if output.is_error:  # one line on stderr, exit 1, as every other failure
        raise RuntimeError(output.text.splitlines()[0])
    print(output.text)
    return 0


def _journaled(args: argparse.Namespace, **options: Any) -> Any:
    """The workspace of context ``--context`` with its persisted journal."""
    journal = args.journal or os.environ.get(JOURNAL_ENV)
    if not journal:
        raise UsageError(f"a journal URL is needed (--journal or ${JOURNAL_ENV}): a "
                         "context's changes are kept in memory otherwise, and that memory "
                         "ended with its process")
    from toolfs.workspace import Workspace

    return Workspace(args.url, dict(args.option) or None, context_id=args.context,
                     journal=journal, **options)


def _changes(args: argparse.Namespace) -> int:
    """``toolfs changes``: one line per change (and its diff with ``--diff``)."""
    workspace = _journaled(args)
    for c in workspace.changes():
        where = f"{c.path} -> {c.to_path}" if c.to_path else c.path
        before = c.before.short if c.before is not None else "-"
        after = c.after.short if c.after is not None else "-"
        print(f"{c.position:>5}  {c.at.isoformat(timespec='seconds')}  {c.kind:<8} "
              f"{where}  ({c.tool}; {before} -> {after})")
        if args.diff:
            print(c.diff().rstrip("\n"))
    for cp in workspace.journal.checkpoints():
        label = f" {cp.label!r}" if cp.label else ""
        print(f"checkpoint {cp.id}{label} at position {cp.position} "
              f"({cp.created_at.isoformat(timespec='seconds')})")
    return 0


def _rewind(args: argparse.Namespace) -> int:
    """``toolfs rewind``: the files restored, or why nothing was (exit 1)."""
    from toolfs.policy.rules import Policy

    workspace = _journaled(args, policy=Policy(on_stale=args.on_stale))
    target: str | int = int(args.to) if args.to.isdigit() else args.to
    result = workspace.rewind(target)
    for path in result.restored:
        print(f"restored {path}")
    if not result.refused:
        if not result.restored:
            print("nothing to rewind")
        return 0
    for path, err in result.refused.items():
        print(f"refused {path}: [{err.code}] {err.message}")
        diff = err.details.get("diff")
        if isinstance(diff, str) and diff:
            print(diff.rstrip("\n"))
    states = {p: s for p, s in result.states.items() if s != "old"}
    if states:
        print("files not back to their old state: " + ", ".join(
            f"{p} ({s})" for p, s in states.items()))
    raise RuntimeError(f"nothing was rewound: {len(result.refused)} file(s) refused")


def _serve(args: argparse.Namespace) -> int:
    options = dict(args.option)
    token = args.token or os.environ.get(TOKEN_ENV) or None
    redact = Redactor.for_options(options, token)
    if args.transport == "http" and not token:
        raise UsageError(f"--transport http needs a bearer token: pass --token or set "
                         f"{TOKEN_ENV}")
    if args.transport == "stdio" and (args.host, args.port, args.token) != (None, None, None):
        raise UsageError("--host, --port and --token apply to --transport http only")
    if args.transport == "stdio" and args.max_sessions is not None:
        raise UsageError("--max-sessions applies to --transport http only")
    if args.max_sessions is not None and args.max_sessions < 1:
        raise UsageError("--max-sessions must be at least 1")

    from toolfs.integrations.mcp_server import (
        DEFAULT_MAX_SESSIONS,
        DEFAULT_PORT,
        ToolfsMCP,
        check_token,
    )

    if args.transport == "http":
        try:
            check_token(token or "")
        except ValueError as exc:
            source = "--token" if args.token else TOKEN_ENV
            raise UsageError(f"{source}: {exc}") from None
    from toolfs.policy.rules import Policy
    from toolfs.workspace import Workspace

    workspace = Workspace(args.url, options or None, root=args.root,
                          read_only=args.read_only, deny=tuple(args.deny),
                          policy=Policy(on_stale=args.on_stale),
                          trust_conditions=args.trust_conditions, timeout=args.timeout)
    workspace.check_root()  # a missing bucket is said now, not on every call
    server = ToolfsMCP(workspace, redact=redact, tools=args.tools)
    with _log_to_stderr(redact):
        if args.transport == "stdio":
            server.serve_stdio()
            return 0

        def ready(url: str) -> None:
            print(f"toolfs: serving {redact.message(workspace.url)} over MCP at {url} "
                  "(Authorization: Bearer <token>)", file=sys.stderr, flush=True)

        server.serve_http(token=token or "", host=args.host or "127.0.0.1",
                          port=DEFAULT_PORT if args.port is None else args.port,
                          max_sessions=args.max_sessions or DEFAULT_MAX_SESSIONS, ready=ready)
    return 0


@contextlib.contextmanager
def _log_to_stderr(redact: Redactor) -> Iterator[None]:
    """Warnings and errors of the server stack on stderr, credentials masked."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("toolfs: %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(redact.log_filter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
