"""PyInstaller entry script for the bundle: the same `opscope` console script.

`app.entry.main` calls `multiprocessing.freeze_support()` first, so the engine host's spawn
child (which re-runs this executable) becomes the child instead of a second GUI.
"""

import sys

from app.entry import main

if __name__ == "__main__":
    sys.exit(main())
