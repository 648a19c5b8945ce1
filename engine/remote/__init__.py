"""Work on another machine over the user's own SSH: the target and the ssh command line
(target.py), the version handshake, files sent once by content hash and a command relayed
(link.py), the window's engine host there (window_host.py), and the host side's data-only
commands (`opscope remote ...`, host_side.py). Nothing crosses the link but data: JSON
lines, wire messages (engine/run/wire.py) and file bytes checked against their hash."""
