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
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from toolfs.deadline import DEFAULT_TIMEOUT
from toolfs.redact import Redactor, is_credential_name

if TYPE_CHECKING:
    from toolfs.workspace import Workspace

ServerSetup = Callable[[argparse.Namespace, "Workspace", dict[str, Any], "str | None"],
                       tuple[Any, Any]]
"""What ``toolfs serve`` calls for OAuth, principals and audit: given the parsed command
line, the server's workspace, its storage options and the static token, it returns the
rooms and the resource server (``None`` for what is not asked for), raising
:class:`UsageError` for a bad combination. ``toolfs.server.command.setup`` is the one the
``toolfs`` entry point (``toolfs.__main__``) passes: the server package sits above this
module, which never imports it."""

TOKEN_ENV = "TOOLFS_TOKEN"
INTROSPECTION_SECRET_ENV = "TOOLFS_INTROSPECTION_SECRET"
JOURNAL_ENV = "TOOLFS_JOURNAL"
FORMATS = ("json_schema", "openai", "openai_responses", "anthropic", "mcp")


class UsageError(Exception):
    """A bad command line: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, with errors as one line instead of usage plus a line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def main(argv: Sequence[str] | None = None, *, server: ServerSetup | None = None) -> int:
    """Run the command line; returns the exit status. ``server`` sets up OAuth,
    principals and audit for ``toolfs serve`` (see :data:`ServerSetup`)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else 2
    args.server_setup = server
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
        "file tools for AI agents (read, write, edit, glob, grep, ls; notebook_edit on "
        "request) over any fsspec filesystem, with stale-write protection."))
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
    serve.add_argument("--ledger", metavar="URL", default=None,
                       help="HTTP: keep what each context observed in this object-store "
                       "directory (opened with the -o options), so that several replicas "
                       "behind a load balancer serve any call of a context; the served URL "
                       "itself puts it in a hidden .toolfs-ledger directory there")
    serve.add_argument("--sticky", action="store_true",
                       help="with --ledger: the balancer sends each context to one replica "
                       "(sticky routing), so a replica answers from its own copy of the "
                       "context's observations and checks the ledger only when a change "
                       "is refused (a read or an edit then adds one ledger request)")
    serve.add_argument("--timeout", type=_seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                       help="each tool call ends by then, every request and retry in it "
                       f"(default: {DEFAULT_TIMEOUT:g}; 'none': no deadline)")
    # Many remote agents (docs/server.md): OAuth, a room per principal, an audit trail.
    auth = serve.add_argument_group("OAuth and principals (HTTP; see docs/server.md)")
    auth.add_argument("--auth-issuer", metavar="ISSUER",
                      help="accept OAuth access tokens of this issuer (its exact iss)")
    auth.add_argument("--resource", metavar="URL",
                      help="this server's public URL, e.g. https://files.example.com/mcp: "
                      "the audience tokens must be issued for (RFC 8707), and where the "
                      "protected-resource metadata names it")
    auth.add_argument("--jwks-url", metavar="URL",
                      help="the issuer's JWKS (default: from its metadata)")
    auth.add_argument("--introspection-url", metavar="URL",
                      help="check opaque tokens with RFC 7662 introspection here instead")
    auth.add_argument("--introspection-client-id", metavar="ID",
                      help="this server's client id at the introspection endpoint (secret: "
                      f"${INTROSPECTION_SECRET_ENV})")
    auth.add_argument("--audience", metavar="AUD",
                      help="the aud tokens must carry when the issuer cannot put --resource "
                      "there (default: --resource)")
    auth.add_argument("--required-scope", metavar="SCOPE", action="append", default=[],
                      help="refuse tokens without this scope (403 insufficient_scope; "
                      "repeatable)")
    auth.add_argument("--principals", metavar="FILE",
                      help="a room per principal: root, scopes, deny, on_stale (TOML)")
    auth.add_argument("--groups-claim", metavar="CLAIM", default="groups",
                      help="the token claim a principal's groups match reads (default: "
                      "groups)")
    auth.add_argument("--audit", metavar="PATH_OR_URL",
                      help="append every change as a JSON line to this file, or batch "
                      "lines into new objects under this fsspec URL")
    auth.add_argument("--audit-reads", action="store_true",
                      help="with --audit: every read too")
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
        raise RuntimeError(output.text.splitlines()[0].removeprefix("Error "))
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
    redact = Redactor.for_options(options, token, os.environ.get(INTROSPECTION_SECRET_ENV))
    oauth = args.auth_issuer is not None or args.principals is not None
    _check_auth_args(args)
    if args.transport == "http" and not token and not oauth:
        raise UsageError(f"--transport http needs a bearer token: pass --token or set "
                         f"{TOKEN_ENV} (or --auth-issuer / --principals)")
    if args.transport == "stdio" and (args.host, args.port, args.token) != (None, None, None):
        raise UsageError("--host, --port and --token apply to --transport http only")
    if args.transport == "stdio" and args.max_sessions is not None:
        raise UsageError("--max-sessions applies to --transport http only")
    if args.max_sessions is not None and args.max_sessions < 1:
        raise UsageError("--max-sessions must be at least 1")
    if args.transport == "stdio" and args.ledger is not None:
        raise UsageError("--ledger applies to --transport http only")
    if args.sticky and args.ledger is None:
        raise UsageError("--sticky needs --ledger (without it, each replica keeps its own "
                         "observations: route each context to one replica)")

    from toolfs.integrations.mcp_server import (
        DEFAULT_MAX_SESSIONS,
        DEFAULT_PORT,
        ToolfsMCP,
        check_token,
    )

    if args.transport == "http" and token is not None:
        try:
            check_token(token)
        except ValueError as exc:
            source = "--token" if args.token else TOKEN_ENV
            raise UsageError(f"{source}: {exc}") from None
    from toolfs.integrations._mcp_contexts import ServerContexts
    from toolfs.policy.rules import Policy
    from toolfs.workspace import AsyncWorkspace, Workspace

    ledger, hidden = (None, ()) if args.ledger is None else \
        _open_ledger(args.url, args.root, args.ledger, options, sticky=args.sticky)
    workspace = Workspace(args.url, options or None, root=args.root,
                          read_only=args.read_only, deny=(*args.deny, *hidden),
                          policy=Policy(on_stale=args.on_stale),
                          trust_conditions=args.trust_conditions, timeout=args.timeout)
    workspace.check_root()  # a missing bucket is said now, not on every call
    rooms, auth = None, None
    if (args.auth_issuer, args.principals, args.audit) != (None, None, None):
        if args.server_setup is None:
            raise UsageError("--auth-issuer, --principals and --audit need toolfs.server: run "
                             "the toolfs command or python -m toolfs")
        # The principals' rooms hide the ledger as the server's root does.
        args.deny = [*args.deny, *hidden]
        rooms, auth = args.server_setup(args, workspace, options, token)
    served = AsyncWorkspace(workspace) if rooms is None else rooms.default
    server = ToolfsMCP(served, redact=redact, tools=args.tools, rooms=rooms,
                       contexts=ServerContexts(served, ledger=ledger))
    try:
        with _log_to_stderr(redact):
            if args.transport == "stdio":
                server.serve_stdio()
                return 0

            def ready(url: str) -> None:
                how = ("Authorization: Bearer <token>" if auth is None else
                       f"OAuth, issuer {args.auth_issuer}" if args.auth_issuer else
                       "static tokens of the principals file")
                print(f"toolfs: serving {redact.message(workspace.url)} over MCP at {url} "
                      f"({how})", file=sys.stderr, flush=True)

            if rooms is not None and rooms.audit is not None:
                # uvicorn re-raises SIGTERM once it has shut down; as an exception here
                # it lets the audit sink write the lines it holds (finally below).
                signal.signal(signal.SIGTERM, _exit_on_signal)
            server.serve_http(token=None if auth is not None else token or "",
                              host=args.host or "127.0.0.1",
                              port=DEFAULT_PORT if args.port is None else args.port,
                              max_sessions=args.max_sessions or DEFAULT_MAX_SESSIONS,
                              ready=ready, auth=auth)
    finally:
        if rooms is not None:
            rooms.close()
    return 0


def _open_ledger(url: str, root: str | None, ledger_url: str, options: dict[str, Any], *,
                 sticky: bool = False) -> tuple[Any, tuple[str, ...]]:
    """``--ledger``: the ledger's store, and the deny rules that hide it from the tools
    when it lies inside the served root (the root itself: its ``.toolfs-ledger``)."""
    from fsspec.core import url_to_fs

    from toolfs.policy.shared_ledger import DEFAULT_PREFIX, open_ledger_store

    served_fs, served = url_to_fs(url, **options)
    ledger_fs, where = url_to_fs(ledger_url, **options)
    served = served.rstrip("/") + (f"/{root.strip('/')}" if root else "")
    where = where.rstrip("/")
    hidden: tuple[str, ...] = ()
    if type(ledger_fs) is type(served_fs) and (where == served
                                               or where.startswith(served + "/")):
        if where == served:
            where = f"{served}/{DEFAULT_PREFIX}"
            ledger_url = f"{ledger_url.rstrip('/')}/{DEFAULT_PREFIX}"
        # Anchored at the root: the ledger's entries are neither listed, read nor written.
        hidden = ("/" + where[len(served) + 1:],)
    return open_ledger_store(ledger_url, options, trust_local=sticky), hidden


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _check_auth_args(args: argparse.Namespace) -> None:
    """The OAuth, principals and audit options that go together (usage errors)."""
    http_only = {"--auth-issuer": args.auth_issuer, "--resource": args.resource,
                 "--jwks-url": args.jwks_url, "--introspection-url": args.introspection_url,
                 "--introspection-client-id": args.introspection_client_id,
                 "--audience": args.audience, "--principals": args.principals,
                 "--required-scope": args.required_scope or None}
    given = [name for name, value in http_only.items() if value is not None]
    if args.transport == "stdio" and given:
        raise UsageError(f"{given[0]} applies to --transport http only")
    if args.auth_issuer is None:
        needs = [n for n in ("--resource", "--jwks-url", "--introspection-url",
                             "--introspection-client-id", "--audience")
                 if http_only[n] is not None]
        if needs:
            raise UsageError(f"{needs[0]} needs --auth-issuer")
    elif args.resource is None:
        raise UsageError("--auth-issuer needs --resource (this server's URL: the audience "
                         "its tokens are issued for)")
    if args.jwks_url is not None and args.introspection_url is not None:
        raise UsageError("give --jwks-url or --introspection-url, not both")
    if args.principals is not None and args.token:
        raise UsageError("with --principals, give each static token as a principal's "
                         "match = { token_sha256 = \"...\" } instead of --token")
    if args.audit_reads and args.audit is None:
        raise UsageError("--audit-reads needs --audit")


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
