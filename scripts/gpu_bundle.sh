#!/usr/bin/env bash
# Builds the GPU check's programs for Hopper (sm_90) into build-gpu/ and packs them, with the shared
# libraries and the OpenMPI a GPU machine without our Debian packages lacks, into build-gpu/bundle.tar.xz, which
# scripts/gpu_check.sh unpacks. CUDA's own libraries (cudart, cuBLASLt, cuDNN, NCCL) are left out:
# the GPU machine has them, matching its driver. Usage: scripts/gpu_bundle.sh
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$repo_root/build-gpu"
nvcc_path="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
[[ -x "$nvcc_path" ]] || { echo "gpu_bundle: nvcc not found (looked on PATH and at /usr/local/cuda/bin)" >&2; exit 1; }

programs=(tests/ops/zt_ops_tests tests/comm/test_comm tests/nn/nn_on_device_test bench/train/bench_gpt zerotrain)
cmake -S "$repo_root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DZT_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc_path" \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DZT_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target $(for p in "${programs[@]}"; do basename "$p"; done) |
  "$repo_root/scripts/without_progress.sh"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for p in "${programs[@]}"; do cp "$build/$p" "$stage/bin/"; done
# Every library they load, less glibc's, GCC's and CUDA's (a newer system has newer ones of the first two).
skip='/(ld-linux[^/]*|lib(c|m|dl|rt|pthread|gcc_s|stdc\+\+|cuda|cudart|cublas|cublasLt|nccl|cudnn[a-z_]*))\.so[^/]*$'
# OpenMPI's launcher, daemon, components and help texts, relocated (OPAL_PREFIX=mpi/usr there), for
# the engine's runs of several ranks on one GPU; the interconnects' components (ucx, ofi, psm,
# verbs) stay behind: one machine's ranks talk through shared memory.
ompi=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
mkdir -p "$stage/mpi/usr/bin" "$stage/mpi$ompi" "$stage/mpi/usr/share"
cp /usr/bin/orterun /usr/bin/orted "$stage/mpi/usr/bin/"
ln -s orterun "$stage/mpi/usr/bin/mpirun"
cp -r /usr/share/openmpi "$stage/mpi/usr/share/"
for c in "$ompi"/*.so; do [[ $c =~ (ucx|ofi|psm|openib|verbs) ]] || cp "$c" "$stage/mpi$ompi/"; done
for p in "$stage"/bin/* "$stage"/mpi/usr/bin/orte* "$stage/mpi$ompi"/*.so; do ldd "$p"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | grep -Ev "$skip" | while read -r lib; do cp -L "$lib" "$stage/lib/"; done
# xz's fastest level on every core: a few MiB more than its default, in a sixth of the time.
tar -C "$stage" -cf - . | xz -1 -T0 >"$build/bundle.tar.xz"
echo "gpu_bundle: $build/bundle.tar.xz, $(du -m "$build/bundle.tar.xz" | cut -f1) MiB:" \
  "$(ls "$stage/bin" | tr '\n' ' ')+ $(ls "$stage/lib" | wc -l) libraries"
