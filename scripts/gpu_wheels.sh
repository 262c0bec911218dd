#!/usr/bin/env bash
# Wheels for running this checkout on the GPU machine (Python 3.12 with jax, jaxlib and JAX's CUDA 13 plugin 0.11.2,
# the CUDA wheels, click, rich, pyyaml, safetensors and pytest preinstalled; no package index there: ../shared/GPU.md):
# jaxport's own wheel and the pure-Python dependencies the machine lacks (flatbuffers), into .whl-gpu/ at the
# checkout's root (excluded from git). With --serve, kserve and tritonclient's gRPC client too, for the serving
# comparison of benchmarks/bench_gpu.py (numpy, ml_dtypes, jax and grpcio left out: the machine's own are used).
# usage: scripts/gpu_wheels.sh [--serve]      then scripts/gpu_run.sh there (it installs them into /tmp/site).
set -eu
root=$(git rev-parse --show-toplevel)
cd "$root"
mkdir -p .git/info
grep -qx '/.whl-gpu/' .git/info/exclude 2>/dev/null || echo '/.whl-gpu/' >> .git/info/exclude
rm -rf .whl-gpu && mkdir -p .whl-gpu
py=python3
[ -x .venv/bin/python ] && py=.venv/bin/python
"$py" -m pip wheel -q --no-deps . -w .whl-gpu
platforms="--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
# shellcheck disable=SC2086
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $platforms \
  -d .whl-gpu flatbuffers
if [ "${1:-}" = "--serve" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # shellcheck disable=SC2086
  "$py" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp $platforms \
    -d "$tmp" "kserve>=0.21,<0.22" "tritonclient[grpc]>=2.60,<3"
  rm -f "$tmp"/numpy-*.whl "$tmp"/ml_dtypes-*.whl "$tmp"/jax-*.whl "$tmp"/jaxlib-*.whl "$tmp"/grpcio-*.whl
  cp -f "$tmp"/*.whl .whl-gpu/
fi
du -sh .whl-gpu
