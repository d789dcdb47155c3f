"""``python -m bench``: see :mod:`bench`."""

from bench.cli import main

raise SystemExit(main())
