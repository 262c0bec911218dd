#!/usr/bin/env bash
# Wheels for `jaxport serve` and the serving benchmark's TPU section on the TPU host (Python 3.11, no package index
# there): kserve (the extra jaxport[serve]) and tritonclient's gRPC client, with every dependency, as cp311 wheels,
# added to .whl-tpu/ beside what ../shared/tpu/wheels.sh put there (run that first). numpy, ml_dtypes and jax are
# left out: the host's own come first on its PYTHONPATH.
# usage: ../shared/tpu/wheels.sh && benchmarks/tpu_serve_wheels.sh
#   then on the TPU host, after installing .whl-tpu/*.whl as ../shared/TPU.md says:
#   python3 benchmarks/bench_serve.py --uds --quick      # or without --quick: medians of three runs
set -eu
root=$(git rev-parse --show-toplevel)
cd "$root"
test -d .whl-tpu || { echo "run ../shared/tpu/wheels.sh first (it makes .whl-tpu/)" >&2; exit 2; }
py=python3
[ -x .venv/bin/python ] && py=.venv/bin/python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download -q --only-binary=:all: --python-version 3.11 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$tmp" "kserve>=0.21,<0.22" "tritonclient[grpc]>=2.60,<3"
rm -f "$tmp"/numpy-*.whl "$tmp"/ml_dtypes-*.whl
cp -f "$tmp"/*.whl .whl-tpu/
du -sh .whl-tpu
