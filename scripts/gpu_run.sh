#!/usr/bin/env bash
# The GPU machine's whole run, in one command of at most 9.2 minutes (each step's limit), its results under $OUT (../shared/GPU.md: a session
# has 15 minutes of device time and a start costs one or more). Prepare on a CPU-only machine first:
#   make gpu-build                                       # build/gpu: the tier's artifacts, goldens, executables
#   .venv-cuda-0.11.2/bin/python benchmarks/bench_gpu.py build build/gpu-bench   # the transformer's executables
#   scripts/gpu_wheels.sh [--serve]                      # .whl-gpu: jaxport's wheel (and kserve's, for serving)
# then run, carrying build/gpu, build/gpu-bench and .whl-gpu:
#   scripts/gpu_run.sh
# It writes $OUT/machine.txt (nvidia-smi, JAX's devices and versions), $OUT/h200.json (jaxport target: the GPU's real
# target config, to replace XLA's spec in jaxport/run/compile/gpu/), $OUT/tier.txt and $OUT/tier/*.json (make test-gpu
# and the figures its tests read), $OUT/bench.json (benchmarks/bench_gpu.py run). Each step has a time limit and the
# next runs whatever the last one did; $OUT/steps.txt gives each step's exit status and seconds.
set -u
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
steps="$OUT/steps.txt"
: > "$steps"
step() {  # step NAME SECONDS COMMAND...: run it with a time limit, log its status
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@"
  echo "$name exit=$? seconds=$((SECONDS - start))" >> "$steps"
}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-gpu/*.whl \
  > "$OUT/install.txt" 2>&1
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
step machine 30 sh -c "nvidia-smi; python3 -c 'import jax, jaxlib, jaxport; print(jax.__version__, jaxlib.__version__, \
jaxport.__version__); print(jax.devices())'; python3 -m pip list 2>/dev/null | grep -i -e jax -e nvidia -e cudnn" \
  > "$OUT/machine.txt" 2>&1
step capture 60 jaxport target -o "$OUT/h200.json" --json > "$OUT/capture.txt" 2>&1
step tier 240 env JAXPORT_GPU_BUILD=build/gpu JAXPORT_GPU_REPORT="$OUT/tier" \
  python3 -m pytest -q -p no:cacheprovider -rA tests/gpu > "$OUT/tier.txt" 2>&1
bench=$(mktemp -d)
cp -r build/gpu-bench/. "$bench/" && cp -r build/gpu "$bench/tier"
step bench 220 python3 benchmarks/bench_gpu.py run "$bench" --json "$OUT/bench.json" > "$OUT/bench.txt" 2>&1
cat "$steps"
