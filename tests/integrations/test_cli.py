"""The ``toolfs`` command line: demo, schema, serve, help and one-line errors."""

from __future__ import annotations

import importlib.util
import io
import json
import logging
import os
import pathlib
import re
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import fsspec
import pytest
from gcsfs.core import GCSFileSystem

from toolfs.integrations.cli import _storage_option, main
from toolfs.integrations.demo import run_demo
from toolfs.redact import Redactor
from toolfs.schemas import tool_definitions


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


ROOT = pathlib.Path(__file__).resolve().parents[2]


SECRET = "S3CR3T-cli-do-not-leak-7730"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


class _LeakyOpen(fsspec.AbstractFileSystem):  # type: ignore[misc]
    """A filesystem that quotes its credentials when it refuses to open."""

    protocol = "toolfsleakyopen"

    def __init__(self, **options: Any) -> None:
        raise ValueError(f"invalid credentials {options}")


class _LeakyType(fsspec.AbstractFileSystem):  # type: ignore[misc]
    protocol = "toolfsleakytype"

    def __init__(self, **options: Any) -> None:
        raise TypeError(f"bad option token={options.get('token')}")


def test_the_cli_finds_searches_and_lists(tmp_path: pathlib.Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("import os\nVALUE = 1\n")
    (tmp_path / "notes.md").write_text("value is one\n")
    code, out, err = _cli("glob", "**/*.py", str(tmp_path))
    assert code == 0 and out.splitlines() == ["pkg/mod.py"], err
    code, out, _ = _cli("grep", "value", str(tmp_path), "-i")
    assert code == 0
    assert set(out.splitlines()) >= {"notes.md:1:value is one", "pkg/mod.py:2:VALUE = 1"}
    code, out, _ = _cli("grep", "value", str(tmp_path), "--mode", "count")
    assert code == 0 and out.splitlines() == ["notes.md:1"]
    code, out, _ = _cli("ls", str(tmp_path))
    assert code == 0 and "pkg/" in out.splitlines()
    code, _, err = _cli("ls", str(tmp_path), "--path", "missing")
    assert code == 1 and err.count("\n") == 1 and "[not_found]" in err
    code, _, err = _cli("serve", str(tmp_path), "--tools", "read,frobnicate")
    assert code == 2 and "unknown tool 'frobnicate'" in err


def test_schema_prints_a_subset(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["schema", "--tools", "glob,ls"]) == 0
    assert [d["name"] for d in json.loads(capsys.readouterr().out)] == ["glob", "ls"]


@pytest.mark.parametrize("argv", [[], ["demo"], ["schema"], ["serve"]],
                         ids=["toolfs", "demo", "schema", "serve"])
def test_help_everywhere(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, _ = run(capsys, *argv, "--help")
    assert code == 0
    assert out.startswith(f"usage: toolfs {' '.join(argv)}".rstrip())


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--version")[:2] == (0, "toolfs 0.2.0\n")


@pytest.mark.parametrize(("argv", "code", "message"), [
    ([], 2, "toolfs: error: the following arguments are required: COMMAND"),
    (["launch"], 2, "toolfs: error: argument COMMAND: invalid choice: 'launch'"),
    (["schema", "--format", "xml"], 2, "toolfs schema: error: argument --format: invalid choice"),
    (["demo", "--backend", "ftp"], 2, "toolfs demo: error: argument --backend: invalid choice"),
    (["serve"], 2, "toolfs serve: error: the following arguments are required: URL"),
    (["serve", "memory://x", "-o", "novalue"], 2, "argument -o/--option: expected KEY=VALUE"),
    (["serve", "memory://x", "--transport", "http"], 2,
     "toolfs serve: error: --transport http needs a bearer token"),
    (["serve", "memory://x", "--port", "9"], 2,
     "toolfs serve: error: --host, --port and --token apply to --transport http only"),
    (["serve", "nosuchproto://x"], 1, "toolfs serve: error: [invalid_arguments] cannot open"),
])
def test_errors_are_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                             argv: list[str], code: int, message: str) -> None:
    monkeypatch.delenv("TOOLFS_TOKEN", raising=False)
    got, out, err = run(capsys, *argv)
    assert got == code
    assert out == ""
    assert err.count("\n") == 1, err
    assert message in err


@pytest.mark.parametrize(("cls", "option"), [(_LeakyOpen, "secret"), (_LeakyType, "token")])
def test_credentials_never_appear_in_errors(capsys: pytest.CaptureFixture[str],
                                            cls: type, option: str) -> None:
    fsspec.register_implementation(cls.protocol, cls, clobber=True)
    code, out, err = run(capsys, "serve", f"{cls.protocol}://bucket", "-o", f"{option}={SECRET}")
    assert code == 1
    assert err.count("\n") == 1 and "***" in err, err
    assert SECRET not in out + err


def test_storage_options_decode_json_but_keep_credentials_as_text() -> None:
    assert _storage_option("anon=true") == ("anon", True)
    assert _storage_option('client_kwargs={"region_name": "eu-west-1"}') == (
        "client_kwargs", {"region_name": "eu-west-1"})
    assert _storage_option("endpoint_url=http://h:9000") == ("endpoint_url", "http://h:9000")
    assert _storage_option("key=12345") == ("key", "12345")
    assert _storage_option("session_token=true") == ("session_token", "true")
    assert _storage_option("x=a=b") == ("x", "a=b")


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("fmt", ["openai", "openai_responses", "anthropic", "mcp", "json_schema"])
def test_schema_prints_the_definitions(capsys: pytest.CaptureFixture[str], fmt: str,
                                       strict: bool) -> None:
    code, out, _ = run(capsys, "schema", "--format", fmt, *(["--strict"] if strict else []))
    assert code == 0
    assert json.loads(out) == tool_definitions(fmt, strict=strict)  # type: ignore[arg-type]
    assert (tool_definitions(fmt, strict=True)  # type: ignore[arg-type]
            != tool_definitions(fmt))  # type: ignore[arg-type]


def test_python_dash_m_and_the_script() -> None:
    for argv in ([sys.executable, "-m", "toolfs"], [os.path.join(os.path.dirname(sys.executable),
                                                                 "toolfs")]):
        done = subprocess.run([*argv, "schema", "--format", "openai"], capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert [t["function"]["name"] for t in json.loads(done.stdout)] == [
            "read", "write", "edit", "glob", "grep", "ls"]


def test_demo_tells_the_story(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "demo")
    assert (code, err) == (0, "")
    steps = re.findall(r"^(\d)\. Agent ([AB]) ", out, re.MULTILINE)
    assert steps == [("1", "A"), ("2", "B"), ("3", "A"), ("4", "B"), ("5", "B")]
    assert "   | Error [stale]" in out
    assert "   | -timeout = 30\n   | +timeout = 60\n" in out  # what changed since B's read
    assert out.count("   | Edited config.toml") == 2
    assert out.rstrip().splitlines()[-2] == (
        "Summary: 3 edits attempted, 2 applied, 1 refused as stale, no update lost.")


def test_demo_transcript_in_the_docs_is_current() -> None:
    out = io.StringIO()
    run_demo("memory", out)
    doc = (ROOT / "docs" / "cli.md").read_text()
    assert f"```text\n$ toolfs demo\n{out.getvalue()}```" in doc


def test_demo_on_a_local_directory() -> None:
    out = io.StringIO()
    outcome = run_demo("local", out)
    assert (outcome.applied, outcome.refused) == (2, 1)
    assert outcome.final == "[service]\nretries = 5\ntimeout = 60\n"
    assert "a local directory (temporary)" in out.getvalue()


@pytest.mark.skipif(importlib.util.find_spec("toolfs.backends.s3") is None,
                    reason="the S3 adapter (toolfs.backends.s3) is not there yet")
def test_demo_on_the_s3_emulator() -> None:
    out = io.StringIO()
    outcome = run_demo("s3", out)
    assert (outcome.applied, outcome.refused) == (2, 1)
    assert "S3 (a local emulator)" in out.getvalue()


def test_redactor_finds_credentials_in_nested_options() -> None:
    redact = Redactor.for_options(
        {"key": "AKIAEXAMPLEKEY", "anon": False, "endpoint_url": "http://h:9000",
         "client_kwargs": {"aws_session_token": "tok-123456", "region_name": "eu-west-1"},
         "credentials": {"private": ["pem-body-xyz"]}, "token": "abc"}, "bearer-777")
    text = "AKIAEXAMPLEKEY tok-123456 pem-body-xyz bearer-777 eu-west-1 http://h:9000 abc"
    assert redact(text) == "*** *** *** *** eu-west-1 http://h:9000 abc"  # "abc" is too short
    assert redact.data({"a": ["x AKIAEXAMPLEKEY"], "n": 1}) == {"a": ["x ***"], "n": 1}
    assert redact.message("s3://me:pw@host/b AKIAEXAMPLEKEY") == "s3://me:***@host/b ***"


def test_log_filter_masks_messages_and_tracebacks() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(Redactor([SECRET]).log_filter())
    log = logging.getLogger("toolfs.test.redaction")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("connecting with %s", SECRET)
        try:
            raise RuntimeError(f"refused: {SECRET}")
        except RuntimeError:
            log.exception("failed at https://user:hunter22@example.com/x")
    finally:
        log.removeHandler(handler)
    out = stream.getvalue()
    assert SECRET not in out and "hunter22" not in out
    assert "connecting with ***" in out
    assert "RuntimeError: refused: ***" in out and "user:***@example.com" in out


@pytest.mark.parametrize("missing", ["anyio", "mcp", "starlette"])
def test_serve_without_the_mcp_extra_says_how_to_install_it(missing: str) -> None:
    """Whichever module of the extra is missing (anyio is imported first; it comes with
    the SDK, not with toolfs), one line names it and the command that installs it."""
    code = (f"import sys; sys.modules[{missing!r}] = None\n"  # as if it were not installed
            "from toolfs.integrations.cli import main\n"
            "raise SystemExit(main(['serve', 'memory://x']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr == (
        "toolfs serve: error: the toolfs MCP server (toolfs serve) needs the optional extra "
        f"'mcp', and {missing} is not installed: pip install 'toolfs[mcp]' (from a checkout "
        "of toolfs: pip install -e '.[mcp]')\n")


def test_demo_on_s3_without_the_test_extra_says_how_to_install_it() -> None:
    code = ("import importlib.util\n"
            "find = importlib.util.find_spec\n"  # as if moto were not installed
            "importlib.util.find_spec = lambda n, *a: None if n == 'moto' else find(n, *a)\n"
            "from toolfs.integrations.cli import main\n"
            "raise SystemExit(main(['demo', '--backend', 's3']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr == ("toolfs demo: error: --backend s3 needs moto to run a local S3 "
                           "emulator: pip install 'toolfs[test]' (from a checkout of toolfs: "
                           "pip install -e '.[test]')\n")


class _CoreGCSForCLI(GCSFileSystem):  # type: ignore[misc]
    """gcsfs's core class by a URL of its own: ``gs://`` resolves to gcsfs's extended
    class, which asks fake-gcs-server for a bucket layout it cannot give."""

    protocol = ("toolfsclitestgcs",)


fsspec.register_implementation("toolfsclitestgcs", _CoreGCSForCLI, clobber=True)


def _missing_bucket_argv(request: pytest.FixtureRequest, which: str) -> tuple[str, list[str]]:
    """A URL in a bucket (container) that does not exist on ``which``'s emulator, and
    the ``-o`` options that reach the emulator."""
    if which == "s3":
        url, options = ("s3://toolfs-no-such-bucket/x",
                        request.getfixturevalue("s3_emulator").s3fs_storage_options())
    elif which == "gcs":
        url, options = ("toolfsclitestgcs://toolfs-no-such-bucket/x",
                        request.getfixturevalue("gcs_emulator").gcsfs_storage_options())
    else:
        url, options = ("abfs://toolfs-no-such-bucket/x",
                        request.getfixturevalue("azure_emulator").adlfs_storage_options())
    argv: list[str] = []
    for key, value in options.items():
        argv += ["-o", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    return url, argv


@pytest.mark.parametrize("which", ["s3", "gcs", "azure"])
def test_a_missing_bucket_is_one_line_and_a_failure(capsys: pytest.CaptureFixture[str],
                                                    request: pytest.FixtureRequest,
                                                    which: str) -> None:
    """``toolfs ls`` of a missing bucket is no empty directory: like glob, grep and a
    server's start, one line naming the bucket and what a person can do, exit 1."""
    url, options = _missing_bucket_argv(request, which)
    noun = "container" if which == "azure" else "bucket"
    for argv in (["ls", url], ["ls", url, "--path", "sub"], ["glob", "*", url],
                 ["grep", "x", url], ["serve", url]):
        code, out, err = run(capsys, *argv, *options)
        assert (code, out) == (1, ""), (argv, out, err)
        assert err.count("\n") == 1, err
        assert err.startswith(f"toolfs {argv[0]}: error: [missing_bucket]"), err
        assert f"the {noun} toolfs-no-such-bucket does not exist" in err, err
        assert "create it, or use a URL in a" in err, err
    code, _, err = run(capsys, "ls", url, *options)  # as docs/cli.md shows it
    assert err == (f"toolfs ls: error: [missing_bucket] (.): the {noun} toolfs-no-such-bucket "
                   f"does not exist (toolfs never creates {noun}s: create it, or use a URL "
                   f"in a {noun} that exists)\n")


def test_serve_checks_its_root_at_start(capsys: pytest.CaptureFixture[str],
                                        s3_emulator: Any, tmp_path: Any) -> None:
    code, _, err = run(capsys, "serve", str(tmp_path / "missing"))
    assert code == 1 and "[not_found]" in err and "missing" in err, err
    argv = ["serve", "s3://toolfs-no-such-bucket/prefix"]
    for key, value in s3_emulator.s3fs_storage_options().items():
        argv += ["-o", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    code, _, err = run(capsys, *argv)
    assert code == 1 and err.count("\n") == 1, err
    assert "the bucket toolfs-no-such-bucket does not exist" in err


def test_commands_other_than_an_authenticated_serve_never_import_the_server_package() -> None:
    # `pip install -e . && toolfs demo` (the README's first command) has no PyJWT crypto
    # backend: the entry point must import toolfs.server only for serve's OAuth options.
    import subprocess
    import sys

    code = ("import sys, contextlib, io\n"
            "from toolfs.__main__ import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    main(['schema'])\n"
            "print('toolfs.server' in sys.modules, 'jwt' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False False", done.stdout
