#!/usr/bin/env bash
# The main job: set up (packages, data), build, then train on 2 ranks (ZT_RANKS) with the
# configuration ZT_CONFIG (default configs/mnist_mlp.json: the MLP on MNIST at ZeRO stage 2),
# print the test accuracy, and evaluate the saved weights again.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
scripts/setup.sh
echo "[run] building zerotrain"
ZT_BUILD_TARGET=zerotrain scripts/build.sh build >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ranks="${ZT_RANKS:-2}"
config="${ZT_CONFIG:-configs/mnist_mlp.json}"  # e.g. configs/cnn_fashion.json, configs/gpt_sotu.json
# Token data is made once by `zerotrain prepare` into the folder the configuration names.
read -r dataset data_dir model_type < <(python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); d = c.get("data", {}); m = c.get("model", {})
print(d.get("dataset", "mnist"), d.get("dir", "-"), m.get("type", "mlp"))' "$config")
if [[ $dataset == tokens && ! -d $data_dir ]]; then
  tokenizer=gpt2
  [[ $model_type == bert ]] && tokenizer=bert
  build/zerotrain prepare --tokenizer "$tokenizer" --out "$data_dir"
elif [[ $dataset == classify && ! -d $data_dir ]]; then
  build/zerotrain prepare --task sotu-party --tokenizer bert --out "$data_dir"
fi
echo "[run] mpirun -np $ranks build/zerotrain train --config $config $*"
mpirun -np "$ranks" --oversubscribe --mca btl self,vader --mca btl_vader_max_send_size 262144 \
  build/zerotrain train --config "$config" "$@"
build/zerotrain eval --config "$config" "$@"
