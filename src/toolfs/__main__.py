"""``python -m toolfs``: the same command line as the ``toolfs`` script."""

from toolfs.integrations.cli import main

raise SystemExit(main())
