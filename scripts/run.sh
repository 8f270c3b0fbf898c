#!/usr/bin/env bash
# The main job: set up (packages, MNIST), build, then train the MLP on MNIST with ZeRO stage 2
# on 2 ranks, print the test accuracy, and evaluate the saved weights again.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
scripts/setup.sh
echo "[run] building"
scripts/build.sh build >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ranks="${ZT_RANKS:-2}"
echo "[run] mpirun -np $ranks build/zerotrain train --config configs/mnist_mlp.json $*"
mpirun -np "$ranks" --oversubscribe --mca btl self,vader --mca btl_vader_max_send_size 262144 \
  build/zerotrain train --config configs/mnist_mlp.json "$@"
build/zerotrain eval --config configs/mnist_mlp.json "$@"
