"""``python -m toolfs`` and the ``toolfs`` script: the command line, with the server
package's OAuth, principals and audit for ``toolfs serve`` (the entry point sits above
both, so neither imports the other). The server package is imported only when
``toolfs serve`` is asked for one of them: the other commands, ``toolfs demo`` among
them, need none of its dependencies (PyJWT with its crypto backend)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _server_setup(*args: Any) -> tuple[Any, Any]:
    """``toolfs.server.command.setup``, imported on first use."""
    try:
        from toolfs.server.command import setup
    except ImportError as exc:
        from toolfs.errors import missing_extra

        raise missing_extra("server", "toolfs serve's OAuth, principals and audit",
                            exc) from exc
    return setup(*args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``toolfs`` command line; returns the exit status."""
    from toolfs.integrations.cli import main as cli_main

    return cli_main(argv, server=_server_setup)


if __name__ == "__main__":
    raise SystemExit(main())
