#!/bin/sh
# Build dist/opscope_<version>_<arch>.deb from the PyInstaller bundle dist/opscope/.
#   packaging/build_deb.sh [BUNDLE_DIR] [OUT_DIR]
# Layout: /opt/opscope/ (the bundle, executable /opt/opscope/opscope), /usr/bin/opscope (a
# tiny launcher script), a .desktop entry and the icon (hicolor 256x256 PNG + scalable SVG).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUNDLE=${1:-$ROOT/dist/opscope}
OUT=${2:-$ROOT/dist}
MAINTAINER=${OPSCOPE_MAINTAINER:-"OpScope team <opscope@example.com>"}
# Compression: xz level 1 by default (~108 MB, ~1 min on 2 cores); OPSCOPE_DEB_LEVEL=6 gives
# ~92 MB in ~4 min (release builds); OPSCOPE_DEB_COMPRESSOR=zstd ~116 MB in seconds.
COMPRESSOR=${OPSCOPE_DEB_COMPRESSOR:-xz}
LEVEL=${OPSCOPE_DEB_LEVEL:-1}

test -x "$BUNDLE/opscope" || { echo "build_deb: no bundle at $BUNDLE (run PyInstaller first)" >&2; exit 1; }
VERSION=$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -n 1)
test -n "$VERSION" || { echo "build_deb: cannot read version from pyproject.toml" >&2; exit 1; }
ARCH=$(dpkg --print-architecture)
PKG="opscope_${VERSION}_${ARCH}"
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/opscope-deb.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT

mkdir -p "$STAGE/DEBIAN" "$STAGE/opt" "$STAGE/usr/bin" "$STAGE/usr/share/applications" \
    "$STAGE/usr/share/icons/hicolor/256x256/apps" "$STAGE/usr/share/icons/hicolor/scalable/apps"
cp -a "$BUNDLE" "$STAGE/opt/opscope"
install -m 0755 "$ROOT/packaging/opscope-launcher.sh" "$STAGE/usr/bin/opscope"
install -m 0644 "$ROOT/packaging/opscope.desktop" "$STAGE/usr/share/applications/opscope.desktop"
install -m 0644 "$ROOT/resources/icons/opscope.png" \
    "$STAGE/usr/share/icons/hicolor/256x256/apps/opscope.png"
install -m 0644 "$ROOT/resources/icons/opscope.svg" \
    "$STAGE/usr/share/icons/hicolor/scalable/apps/opscope.svg"

SIZE_KB=$(du -sk "$STAGE" | cut -f1)
# Qt's xcb platform plugin (PySide6 6.11, `ldd libqxcb.so` / `libQt6XcbQpa.so.6`) needs these
# system libraries; PyInstaller does not bundle them. Debian 12 / Ubuntu 22.04 names, with the
# Ubuntu 24.04 t64 names as alternatives where they were renamed.
# The bundle needs the build machine's glibc or newer.
GLIBC=$(getconf GNU_LIBC_VERSION | cut -d' ' -f2)
DEPENDS="libc6 (>= $GLIBC), libegl1, libgl1, libglib2.0-0t64 | libglib2.0-0, libfontconfig1, \
libfreetype6, libdbus-1-3, libx11-6, libx11-xcb1, libxkbcommon0, libxkbcommon-x11-0, libxcb1, \
libxcb-cursor0, libxcb-icccm4, libxcb-image0, libxcb-keysyms1, libxcb-randr0, libxcb-render0, \
libxcb-render-util0, libxcb-shape0, libxcb-shm0, libxcb-sync1, libxcb-util1, libxcb-xfixes0, \
libxcb-xinerama0, libxcb-xkb1"
cat > "$STAGE/DEBIAN/control" <<CONTROL
Package: opscope
Version: $VERSION
Architecture: $ARCH
Maintainer: $MAINTAINER
Installed-Size: $SIZE_KB
Depends: $DEPENDS
Section: devel
Priority: optional
Homepage: https://example.com/opscope
Description: desktop workbench for ONNX inference optimization
 Live latency, per-operator profiles, quantization and fusion for ONNX models,
 on ONNX Runtime (CPU build). Includes the opscope command line and demo models.
 Run "opscope --self-test" after installing.
CONTROL
mkdir -p "$OUT"
# Files owned by root in the package without needing root or fakeroot here.
dpkg-deb --root-owner-group "-Z$COMPRESSOR" "-z$LEVEL" --build "$STAGE" "$OUT/$PKG.deb" >/dev/null
echo "build_deb: wrote $OUT/$PKG.deb ($(du -h "$OUT/$PKG.deb" | cut -f1))"
