"""`firedup bench` beside `vllm bench serve` on the same real server: vLLM's
CPU build with the tiny model (scripts/setup-servers.sh), the same workload
shape and the same tokenizer folder, the two clients' runs interleaved
(firedup, vllm, vllm, firedup, ...). Prints, for each metric, the median over
each client's runs, their ratio, and the tolerance: 1% for token totals;
for times and throughput 10% or the run-to-run noise measured here
(the larger of the two clients' (max - min) / median), whichever is wider.

    python benchmarks/agreement.py [--runs 3] [--model DIR] [--json]

Exit status 1 when a metric is off by more than its tolerance."""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import vllm_bench

import firedup

ROOT = Path(__file__).resolve().parents[1]
SERVERS = Path(os.environ.get("FIREDUP_SERVERS", ROOT / ".servers"))
VLLM_PYTHON = SERVERS / "venv-vllm" / "bin" / "python"
MODEL = SERVERS / "models" / "tiny-llama"
SHAPE = {"num_prompts": 48, "concurrency": 4, "input_len": 64, "output_len": 32}
TOKENS = ("total_input_tokens", "total_output_tokens")
TIMES = ("mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "output_throughput")
TOKEN_TOLERANCE = 0.01
TIME_TOLERANCE = 0.10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def firedup_bench(url: str, model: Path, ledger: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "firedup", "bench", url, "--model", str(model),
                          "--tokenizer", str(model),
                          "--num-prompts", str(SHAPE["num_prompts"]), "--concurrency", str(SHAPE["concurrency"]),
                          "--input-len", str(SHAPE["input_len"]), "--output-len", str(SHAPE["output_len"]),
                          "--ignore-eos", "--warmup", "1", "--json"],
                         capture_output=True, text=True, env={**os.environ, "FIREDUP_LEDGER": str(ledger)})
    if not out.stdout.strip():
        raise RuntimeError(f"firedup bench failed (exit {out.returncode}): {out.stderr[-1500:]}")
    return json.loads(out.stdout)


def vllm_bench_serve(url: str, model: Path) -> dict:
    return vllm_bench.run(str(VLLM_PYTHON), [
        "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions", "--model", str(model),
        "--tokenizer", str(model), "--dataset-name", "random", "--num-prompts", str(SHAPE["num_prompts"]),
        "--max-concurrency", str(SHAPE["concurrency"]), "--random-input-len", str(SHAPE["input_len"]),
        "--random-output-len", str(SHAPE["output_len"]), "--ignore-eos", "--request-rate", "inf",
        "--disable-tqdm", "--percentile-metrics", "ttft,tpot,itl,e2el"])


def agreement(runs: list[dict[str, list[dict]]]) -> list[dict]:
    """Per metric: each client's median, the ratio, the tolerance, and whether it holds."""
    rows = []
    for key in TOKENS + TIMES:
        values = {client: [r[key] for r in results] for client, results in runs.items()}
        medians = {client: statistics.median(v) for client, v in values.items()}
        noise = max((max(v) - min(v)) / statistics.median(v) for v in values.values())
        tolerance = TOKEN_TOLERANCE if key in TOKENS else max(TIME_TOLERANCE, noise)
        ratio = medians["firedup"] / medians["vllm"]
        rows.append({"metric": key, "firedup": medians["firedup"], "vllm": medians["vllm"], "ratio": ratio,
                     "noise": noise, "tolerance": tolerance, "ok": abs(ratio - 1) <= tolerance,
                     "runs": values})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="runs of each client (default 3)")
    ap.add_argument("--model", type=Path, default=MODEL, help=f"the model folder (default {MODEL})")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    port = free_port()
    cmd = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(args.model),
           "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "512", "--enforce-eager"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_TARGET_DEVICE": "cpu"}
    results: dict[str, list[dict]] = {"firedup": [], "vllm": []}
    with tempfile.TemporaryDirectory() as tmp, \
            firedup.launch(cmd, env=env, log=Path(tmp) / "vllm.log", stall=180) as server:
        ledger = Path(tmp) / "ledger.db"
        firedup_bench(server.url, args.model, ledger)  # a server's first requests are slow: neither client's
        for i in range(args.runs):
            for client in ("firedup", "vllm") if i % 2 == 0 else ("vllm", "firedup"):
                result = (firedup_bench(server.url, args.model, ledger) if client == "firedup"
                          else vllm_bench_serve(server.url, args.model))
                results[client].append(result)
    rows = agreement(results)
    if args.json:
        print(json.dumps({"shape": SHAPE, "rows": rows}))
    else:
        print(f"\n{args.runs} runs each, interleaved, vLLM CPU {args.model.name}: {SHAPE['num_prompts']} prompts, "
              f"concurrency {SHAPE['concurrency']}, {SHAPE['input_len']} input / {SHAPE['output_len']} output "
              "tokens, --ignore-eos, the same --tokenizer\n")
        print("| metric (median of runs) | firedup bench | vllm bench serve | firedup / vllm | tolerance | |")
        print("|---|---:|---:|---:|---:|---|")
        for r in rows:
            print(f"| {r['metric']} | {r['firedup']:.1f} | {r['vllm']:.1f} | {r['ratio']:.3f} | "
                  f"±{100 * r['tolerance']:.0f}% | {'ok' if r['ok'] else 'OFF'} |")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
