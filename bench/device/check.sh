#!/usr/bin/env bash
# The GPU machine's one prepared run (bench/device/README.md): install what the calls
# carried, then in order of value: bench/gpu_check.py (every GPU path), the GPU-marked
# tests, the roofline check on that machine's CPU (a second kind of CPU), each part's
# output into $OUT. A part that fails says so and the next one runs.
#   stage a piece only:   bash bench/device/check.sh stage
#   the whole run:        bash bench/device/check.sh   (GPU_SECONDS=2: each timed run's length)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/opscope-device-out}
SITE=/tmp/opscope-site
PIECES=/tmp/opscope-ort
mkdir -p "$OUT" "$PIECES"
# a piece carried by this call is kept outside the tree: the next call's tree replaces it
cp -n .whl/ort/part-* .whl/ort/SHA256SUMS .whl/ort/COUNT "$PIECES"/ 2>/dev/null
have=$(ls "$PIECES"/part-* 2>/dev/null | wc -l)
echo "onnxruntime-gpu pieces here: $have of $(cat "$PIECES"/COUNT 2>/dev/null || echo '?')"
[ "${1:-}" = stage ] && exit 0

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$SITE" .whl/small/*.whl || echo "warning: the small wheels did not install"
if [ -f "$PIECES/COUNT" ] && [ "$have" = "$(cat "$PIECES/COUNT")" ] &&
  (cd "$PIECES" && sha256sum -c --quiet SHA256SUMS); then
  cat "$PIECES"/part-* | xz -d | tar -C "$SITE" -xf - && echo "onnxruntime-gpu unpacked"
else
  echo "warning: onnxruntime-gpu incomplete: the image's CPU onnxruntime runs (no CUDA)"
fi
export PYTHONPATH="$SITE:$PWD" PYTHONUNBUFFERED=1
python3 - <<'EOF' 2>&1 | tee "$OUT/versions.txt"
import platform, onnxruntime as ort, numpy, onnx
print("python", platform.python_version(), "| onnxruntime", ort.__version__, ort.get_available_providers())
print("numpy", numpy.__version__, "| onnx", onnx.__version__)
EOF
(lscpu; nproc; uptime; nvidia-smi) >"$OUT/machine.txt" 2>&1

echo "== bench/gpu_check.py"
timeout 300 python3 bench/gpu_check.py --seconds "${GPU_SECONDS:-2}" 2>&1 | tee "$OUT/gpu_check.txt"
echo "== GPU-marked tests"
# -p no:warnings: the suite turns warnings into errors for this project's pinned libraries;
# this image's newer ones warn of other things
timeout 240 python3 -m pytest -q -p no:cacheprovider -p no:warnings -m gpu tests/test_gpu.py \
  2>&1 | tee "$OUT/gpu_tests.txt"
echo "== the roofline on this machine's CPU"
timeout 240 python3 bench/roofline_check.py 2>&1 | tee "$OUT/roofline.txt"
find bench/results -name "roofline_check_*.md" -newer "$OUT/versions.txt" -exec cp {} "$OUT"/ \;
ls -la "$OUT"
