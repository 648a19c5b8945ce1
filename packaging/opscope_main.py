"""PyInstaller entry script for the bundle: the same `opscope` console script.

`app.entry.run` calls `app.entry.main`, which calls `multiprocessing.freeze_support()`
first, so the engine host's spawn child (which re-runs this executable) becomes the child
instead of a second GUI.
"""

from app.entry import run

if __name__ == "__main__":
    run()
