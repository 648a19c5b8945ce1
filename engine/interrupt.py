"""Whether the user interrupted this process (Ctrl+C, SIGTERM, SIGHUP). A library that
turns the interruption into its own error (ONNX Runtime stopped mid-initialization says
"initialization failed") must not make a cancelled run read as a failed one: the recorder
and the command line ask here before they call an error an error."""

from __future__ import annotations

import threading

received = threading.Event()
