"""Fail the set-up if both onnxruntime and onnxruntime-gpu are installed.

They install into the same folder and silently overwrite each other's files, so a mixed
install gives a runtime whose providers and version depend on installation order.
"""

from __future__ import annotations

import sys
from importlib import metadata


def main() -> int:
    names = {d.metadata["Name"].lower() for d in metadata.distributions()}
    # onnxruntime-extensions and onnxruntime-genai(-cuda) sit on top of the runtime and
    # install into their own folders.
    found = sorted(
        n
        for n in names
        if n.startswith("onnxruntime")
        and not n.startswith(("onnxruntime-extensions", "onnxruntime-genai"))
    )
    if len(found) != 1:
        print(
            f"check_env: expected exactly one ONNX Runtime package, found {found or 'none'}; "
            "uninstall all of them and reinstall onnxruntime-gpu",
            file=sys.stderr,
        )
        return 1
    import onnxruntime

    print(
        f"check_env: {found[0]} {onnxruntime.__version__}, providers "
        f"{', '.join(onnxruntime.get_available_providers())}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
