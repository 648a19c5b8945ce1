"""The `opscope` console script. Qt is imported only when the desktop app is asked for,
so every engine command runs on machines without Qt."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from engine.cli.main import main as cli_main

    return cli_main(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
