#!/usr/bin/env bash
# Prepares what a session's GPU machine needs and cannot fetch (bench/device/README.md):
#   .whl/small/    the pure-Python packages OpScope needs beyond that machine's image
#   .whl/ort/      onnxruntime-gpu (the project's pin, for its Python 3.12) unpacked and
#                  packed again as tar.xz, in pieces that each fit one call's carry
# Run here, in the repository's root, where pip reaches the package registry:
#   bash bench/device/prepare.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
PIECE_MB=${PIECE_MB:-52}  # MiB; the tree (about 10 MB) travels too: 64 MiB a call in all
ORT=$(sed -n 's/.*"\(onnxruntime-gpu==[0-9.]*\)".*/\1/p' pyproject.toml | head -1)
grep -qx '/.whl/' .git/info/exclude || echo '/.whl/' >>.git/info/exclude
rm -rf .whl/small .whl/ort && mkdir -p .whl/small .whl/ort
get() {  # wheels for the machine's CPython 3.12 on x86-64 Linux, without their needs
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$@"
}
# Beyond the image (its package list: ../.library/device/KINDS.md): the session store
# (sqlite-utils and its needs), the cache folders, the graph layout, the tuner (optuna and
# its needs; SQLAlchemy needs greenlet on x86-64). PySide6 stays here: the check is headless.
get .whl/small platformdirs sqlite-utils sqlite-fts4 click-default-group tabulate \
  "$(sed -n 's/.*"\(graphlay==[0-9.]*\)".*/\1/p' pyproject.toml | head -1)" \
  optuna alembic sqlalchemy greenlet colorlog mako
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
get "$tmp" "$ORT"
mkdir "$tmp/site"
(cd "$tmp/site" && unzip -q "$tmp"/onnxruntime_gpu-*.whl)
# The wheel is 255 MB deflated; xz takes the same files to about half, so fewer calls.
tar -C "$tmp/site" -cf - . | xz -9 -T0 | split -b "${PIECE_MB}M" -d - .whl/ort/part-
(cd .whl/ort && sha256sum part-* >SHA256SUMS && ls part-* | wc -l >COUNT)
echo "ready: $(ls .whl/small | wc -l) wheels in .whl/small ($(du -sh .whl/small | cut -f1));"
echo "       $ORT in $(cat .whl/ort/COUNT) piece(s) of at most $PIECE_MB MB in .whl/ort"
echo "calls: bench/device/README.md"
