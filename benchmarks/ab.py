"""Does `firedup compare` call identical configurations the same, and real
changes a change? The README's demo workload (transformers serve, the tiny
model, 16 prompts at concurrency 4, 32 input and 32 output tokens), each
comparison one `firedup run --repeat K -- A --vs B` (K starts of each,
interleaved A B B A ..., compared pair by pair, Holm over the metrics, the
default minimum effect):

- A/A: the same command twice; a comparison that flags any metric is a false alarm;
- A/B: the same command against it with ``--continuous-batching``, a real effect
  (about 2.5x the output throughput at concurrency 4).

Both sides run torch on one thread (OMP_NUM_THREADS=1): on a 2-core machine
torch's default, a thread a core, fights the benchmark client for the cores
and serves 10x slower (7 against 80 tok/s), which made one comparison last
ten minutes.

The two kinds alternate, so a run cut short holds both; each comparison is
appended to --out (JSON lines) as it ends, and the table is printed from it.

    python benchmarks/ab.py [--aa 20] [--ab 10] [--repeat 3] [--model DIR] [--out ab.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVERS = Path(os.environ.get("FIREDUP_SERVERS", ROOT / ".servers"))
TF = SERVERS / "venv-tf" / "bin" / "transformers"
MODEL = SERVERS / "models" / "tiny-llama"
DEMO = ["--concurrency", "4", "--num-prompts", "16", "--input-len", "32", "--output-len", "32"]
CALLED = ("regression", "improvement")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def comparison(kind: str, model: Path, repeat: int, ledger: Path) -> dict:
    port = str(free_port())
    a = ["env", "OMP_NUM_THREADS=1", str(TF), "serve", str(model), "--host", "127.0.0.1", "--port", port,
         "--device", "cpu", "--log-level", "info"]
    b = [*a, "--continuous-batching"] if kind == "A/B" else a
    out = subprocess.run([sys.executable, "-m", "firedup", "run", "--name", kind.replace("/", ""), "--repeat",
                          str(repeat), "--stall", "120", "--json", *DEMO, "--tokenizer", str(model), "--", *a, "--vs",
                          *b], capture_output=True, text=True,
                         env={**os.environ, "HF_HUB_OFFLINE": "1", "FIREDUP_LEDGER": str(ledger)})
    try:
        report = json.loads(out.stdout.splitlines()[-1])["compare"]
    except (IndexError, KeyError, ValueError):
        return {"kind": kind, "error": (out.stderr or out.stdout)[-600:]}
    flagged = {row["metric"]: row["changes"][0] for row in report["rows"] if row["changes"][0]["verdict"] in CALLED}
    throughput = next(r for r in report["rows"] if r["metric"] == "output_throughput")
    return {"kind": kind, "flagged": flagged, "output_throughput": throughput["values"],
            "delta_pct": throughput["changes"][0]["delta_pct"]}


def table(rows: list[dict]) -> None:
    print("| check | comparisons | flagged (any metric) | metrics flagged, most often "
          "| output tok/s Δ, median | asked |")
    print("|---|---:|---:|---|---:|---|")
    for kind, asked in (("A/A", "no metric flagged in ≥ 95%"), ("A/B", "flagged in ≥ 90%")):
        done = [r for r in rows if r["kind"] == kind and "error" not in r]
        if not done:
            continue
        flagged = sum(1 for r in done if r["flagged"])
        often = Counter(m for r in done for m in r["flagged"]).most_common(3)
        deltas = sorted(r["delta_pct"] for r in done)
        print(f"| {kind} | {len(done)} | {flagged} | {', '.join(f'{m} ({n})' for m, n in often) or '-'} "
              f"| {deltas[len(deltas) // 2]:+.1f}% | {asked} |")
    errors = [r for r in rows if "error" in r]
    if errors:
        print(f"\n{len(errors)} comparison(s) failed to run; the last: {errors[-1]['error']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aa", type=int, default=20)
    ap.add_argument("--ab", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--model", type=Path, default=MODEL)
    ap.add_argument("--out", type=Path, default=Path("ab.jsonl"))
    args = ap.parse_args()
    kinds = ["A/A"] * args.aa + ["A/B"] * args.ab
    order = sorted(range(len(kinds)),
                   key=lambda i: (i if kinds[i] == "A/A" else (i - args.aa) * args.aa / max(1, args.ab)))
    with tempfile.TemporaryDirectory() as tmp:
        for i in order:
            row = comparison(kinds[i], args.model, args.repeat, Path(tmp) / "ledger.db")
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), file=sys.stderr)
    table([json.loads(line) for line in args.out.read_text().splitlines()])


if __name__ == "__main__":
    main()
