#!/bin/sh
# /usr/bin/opscope: start the bundled OpScope (installed by the opscope .deb in /opt/opscope).
exec /opt/opscope/opscope "$@"
