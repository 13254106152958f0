"""``python -m toolfs`` and the ``toolfs`` script: the command line, with the server
package's OAuth, principals and audit for ``toolfs serve`` (the entry point sits above
both, so neither imports the other)."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``toolfs`` command line; returns the exit status."""
    from toolfs.integrations.cli import main as cli_main
    from toolfs.server.command import setup

    return cli_main(argv, server=setup)


if __name__ == "__main__":
    raise SystemExit(main())
