"""Work on another machine over the user's own SSH: the target and the ssh command line
(target.py), the version handshake (handshake.py), files sent once by content hash
(transfer.py), and the host side's data-only commands (`opscope remote ...`, host_side.py).
Nothing crosses the link but text: JSON lines and file bytes checked against their hash."""
