"""`firedup bench` beside `vllm bench serve` on the same real server: vLLM's
CPU build with the tiny model (scripts/setup-servers.sh), the same workload
shape and the same tokenizer folder, the two clients' runs interleaved
(firedup, vllm, vllm, firedup, ...). Prints, for each metric, the median over
each client's runs, their ratio, and the tolerance: 1% for token totals;
for times and throughput 10% or the run-to-run noise measured here
(the larger of the two clients' (max - min) / median), whichever is wider.

The server's own histograms (/metrics, diffed around each run) are the
referee for times: on a small machine a client's own CPU use slows the server
it measures, so the clients are compared on how far each read the server from
what the server itself recorded during that client's runs (its mean TTFT for
TTFT, its mean inter-token latency for TPOT, ITL and throughput). The raw
ratio is printed beside that one. A firedup run that flags its own timing as
unsound (its client stalled, so tokens were read and timed together) is run
again, up to twice, as its report tells a user to; each such run is listed.

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
import urllib.request
from pathlib import Path

import vllm_bench

import firedup
from firedup.bench.run import parse_prometheus

ROOT = Path(__file__).resolve().parents[1]
SERVERS = Path(os.environ.get("FIREDUP_SERVERS", ROOT / ".servers"))
VLLM_PYTHON = SERVERS / "venv-vllm" / "bin" / "python"
MODEL = SERVERS / "models" / "tiny-llama"
SHAPE = {"num_prompts": 48, "concurrency": 4, "input_len": 64, "output_len": 32}
TOKENS = ("total_input_tokens", "total_output_tokens")
TIMES = ("mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "output_throughput")
# the server histogram each timing is referred to; throughput goes as 1 / inter-token latency
SERVER_TTFT, SERVER_ITL = "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds"
REFEREE = {"mean_ttft_ms": (SERVER_TTFT, 1), "mean_tpot_ms": (SERVER_ITL, 1), "mean_itl_ms": (SERVER_ITL, 1),
           "output_throughput": (SERVER_ITL, -1)}
# a firedup run that flags its own timing (its client stalled: tokens read, and
# timed, together) is run again, as its report tells a user to; so is a vllm bench
# serve run whose mean ITL strays from the server's own over that run by more than
# PEER_STRAY (its client starved too, on a loaded machine): no reference then
ATTEMPTS = 3
PEER_STRAY = 0.25
TOKEN_TOLERANCE = 0.01
TIME_TOLERANCE = 0.10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def histograms(url: str) -> dict[str, tuple[float, float]]:
    """Sum and count of the referee histograms, over all their label sets."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        samples = parse_prometheus(response.read().decode(errors="replace"))
    missing = [name for name in (SERVER_TTFT, SERVER_ITL) if f"{name}_count" not in samples]
    if missing:  # a vLLM without them: the referee cannot be read, rather than NaN rows that fail unexplained
        raise RuntimeError(f"the server's /metrics has no {', '.join(missing)}")
    return {name: (sum(samples.get(f"{name}_sum", {}).values()), sum(samples.get(f"{name}_count", {}).values()))
            for name in (SERVER_TTFT, SERVER_ITL)}


def server_means(before: dict, after: dict) -> dict[str, float]:
    """The server's mean of each referee histogram between two scrapes, in ms."""
    out = {}
    for name, (total, count) in after.items():
        n = count - before[name][1]
        out[name] = 1000 * (total - before[name][0]) / n if n else float("nan")
    return out


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


def peer_problems(result: dict, seen: dict[str, float]) -> list[str]:
    """Why a vllm bench serve run cannot be the reference: its mean ITL far
    from what the server itself recorded over the run."""
    stray = result["mean_itl_ms"] / seen[SERVER_ITL] - 1
    return [f"its mean ITL {result['mean_itl_ms']:.2f} ms vs the server's {seen[SERVER_ITL]:.2f} ms"] \
        if abs(stray) > PEER_STRAY else []


def agreement(runs: dict[str, list[dict]], server: dict[str, list[dict]]) -> list[dict]:
    """Per metric: each client's median, the raw ratio, the server's ratio
    over the same runs, the ratio referred to it (raw / server's; tokens: the
    raw one), the tolerance, and whether the referred ratio holds."""
    rows = []
    for key in TOKENS + TIMES:
        values = {client: [r[key] for r in results] for client, results in runs.items()}
        medians = {client: statistics.median(v) for client, v in values.items()}
        noise = max((max(v) - min(v)) / statistics.median(v) for v in values.values())
        tolerance = TOKEN_TOLERANCE if key in TOKENS else max(TIME_TOLERANCE, noise)
        ratio = medians["firedup"] / medians["vllm"]
        server_ratio = 1.0
        if key in REFEREE:
            name, power = REFEREE[key]
            seen = {client: statistics.median(s[name] for s in means) for client, means in server.items()}
            server_ratio = (seen["firedup"] / seen["vllm"]) ** power
        referred = ratio / server_ratio
        rows.append({"metric": key, "firedup": medians["firedup"], "vllm": medians["vllm"], "ratio": ratio,
                     "server_ratio": server_ratio, "referred": referred, "noise": noise, "tolerance": tolerance,
                     "ok": abs(referred - 1) <= tolerance, "runs": values})
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
    server_seen: dict[str, list[dict]] = {"firedup": [], "vllm": []}
    refused: list[list[str]] = []  # the problems of each run taken again
    with tempfile.TemporaryDirectory() as tmp, \
            firedup.launch(cmd, env=env, log=Path(tmp) / "vllm.log", stall=180) as server:
        ledger = Path(tmp) / "ledger.db"
        firedup_bench(server.url, args.model, ledger)  # a server's first requests are slow: neither client's
        for i in range(args.runs):
            for client in ("firedup", "vllm") if i % 2 == 0 else ("vllm", "firedup"):
                for _ in range(ATTEMPTS):
                    before = histograms(server.url)
                    result = (firedup_bench(server.url, args.model, ledger) if client == "firedup"
                              else vllm_bench_serve(server.url, args.model))
                    seen = server_means(before, histograms(server.url))
                    problems = (peer_problems(result, seen) if client == "vllm"
                                else [] if result["health"]["valid"] else result["health"]["problems"])
                    if not problems:
                        break
                    refused.append([f"{client}: {p}" for p in problems])
                server_seen[client].append(seen)
                results[client].append(result)
    rows = agreement(results, server_seen)
    if args.json:
        print(json.dumps({"shape": SHAPE, "rows": rows, "server": server_seen, "refused": refused}))
    else:
        print(f"\n{args.runs} runs each, interleaved, vLLM CPU {args.model.name}: {SHAPE['num_prompts']} prompts, "
              f"concurrency {SHAPE['concurrency']}, {SHAPE['input_len']} input / {SHAPE['output_len']} output "
              "tokens, --ignore-eos, the same --tokenizer\n")
        print("| metric (median of runs) | firedup bench | vllm bench serve | firedup / vllm | the server's "
              "own, firedup's runs / vllm's | referred | tolerance | |")
        print("|---|---:|---:|---:|---:|---:|---:|---|")
        for r in rows:
            print(f"| {r['metric']} | {r['firedup']:.1f} | {r['vllm']:.1f} | {r['ratio']:.3f} | "
                  f"{r['server_ratio']:.3f} | {r['referred']:.3f} | ±{100 * r['tolerance']:.0f}% | "
                  f"{'ok' if r['ok'] else 'OFF'} |")
        for problems in refused:
            print(f"\na run taken again: {'; '.join(problems)}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
