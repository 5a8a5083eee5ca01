"""How fast `firedup diagnose` (and `watch`, following the same finished file) reads a big log, beside
`grep -E -c` on the same file.

Generates (once) a realistic vLLM log of at least --size-mb MB: a real start-up
captured from vLLM 0.32 (CPU), then hours of request traffic (access lines,
engine stats, warnings, handled 404 errors with tracebacks), then the engine
dying of a CUDA out-of-memory error. Then runs, side by side, each tool
--repeat times on the warm file and prints MB/s and peak memory (RSS).

    python benchmarks/scan.py [--size-mb 1024] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STARTUP = ROOT / "tests" / "fixtures" / "captured" / "vllm-ready.log"

sys.path.insert(0, str(ROOT / "src"))
from firedup import rules  # noqa: E402

FAILURE = """\
(EngineCore pid=2301) ERROR 11-29 14:02:11 [core.py:851] EngineCore encountered a fatal error.
(EngineCore pid=2301) ERROR 11-29 14:02:11 [core.py:851] Traceback (most recent call last):
(EngineCore pid=2301) ERROR 11-29 14:02:11 [core.py:851]   File "/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 842, in run_engine_core
(EngineCore pid=2301) ERROR 11-29 14:02:11 [core.py:851]     engine_core.run_busy_loop()
(EngineCore pid=2301) ERROR 11-29 14:02:11 [core.py:851]   File "/venv/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 2090, in execute_model
(EngineCore pid=2301) ERROR 11-29 14:02:11 [core.py:851]     hidden_states = self.model(input_ids)
(EngineCore pid=2301) ERROR 11-29 14:02:11 [core.py:851] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.
(APIServer pid=1805) ERROR 11-29 14:02:11 [async_llm.py:480] AsyncLLM output_handler failed.
(APIServer pid=1805) INFO:     Shutting down
"""


def traffic_block(rng: random.Random, lines: int) -> bytes:
    out = []
    for i in range(lines):
        r = rng.random()
        ts = f"11-29 {10 + i % 4:02d}:{i % 60:02d}:{(i * 7) % 60:02d}"
        if r < 0.95:
            out.append(f'(APIServer pid=1805) INFO:     127.0.0.1:{30000 + rng.randrange(30000)} - '
                       f'"POST /v1/{rng.choice(("completions", "chat/completions"))} HTTP/1.1" 200 OK')
        elif r < 0.952:
            out.append(f"(APIServer pid=1805) INFO {ts} [loggers.py:123] Engine 000: Avg prompt throughput: "
                       f"{rng.random() * 5000:.1f} tokens/s, Avg generation throughput: {rng.random() * 900:.1f} tokens/s, "
                       f"Running: {rng.randrange(64)} reqs, Waiting: {rng.randrange(8)} reqs, GPU KV cache usage: "
                       f"{rng.random() * 100:.1f}%, Prefix cache hit rate: {rng.random() * 100:.1f}%")
        elif r < 0.995:
            out.append(f'(APIServer pid=1805) INFO:     127.0.0.1:{30000 + rng.randrange(30000)} - "GET /metrics HTTP/1.1" 200 OK')
        elif r < 0.998:
            out.append(f"(APIServer pid=1805) WARNING {ts} [protocol.py:93] The following fields were present in the "
                       f"request but ignored: {{'top_k{rng.randrange(9)}'}}")
        else:
            out.append(f"(APIServer pid=1805) ERROR {ts} [serving_chat.py:136] Error with model object='error' "
                       f"message='The model `gpt-{rng.randrange(9)}` does not exist.' type='NotFoundError' param=None code=404")
            out.append('(APIServer pid=1805) INFO:     127.0.0.1:40000 - "POST /v1/chat/completions HTTP/1.1" 404 Not Found')
    return ("\n".join(out) + "\n").encode()


def generate(path: Path, size: int) -> None:
    rng = random.Random(7)
    blocks = [traffic_block(rng, 20000) for _ in range(8)]
    with open(path, "wb") as f:
        # the captured start-up, up to the stop the capture sent (its "[shutdown]" lines)
        f.write(re.split(rb"INFO:     Shutting down|(?<=\n)[^\n]*\[shutdown\]", STARTUP.read_bytes())[0])
        written = 0
        while written < size:
            block = blocks[rng.randrange(len(blocks))]
            f.write(block)
            written += len(block)
        f.write(FAILURE.encode())


def grep_patterns() -> str:
    """The fatal and ready patterns of every pack, rewritten from Python to POSIX ERE
    (not http-served: a request's access line, which a start-up loop would not grep for)."""
    out = []
    for rule in rules.load().rules:
        if rule.kind not in ("fatal", "ready") or rule.id == "http-served":
            continue
        p = rule.pattern.pattern
        p = re.sub(r"\(\?P<\w+>", "(", p).replace("(?:", "(").replace("(?i)", "")
        p = p.replace(r"\d", "[0-9]").replace("*?", "*").replace("+?", "+")
        # A long bounded gap keeps Python's backtracking short; grep's DFA would unroll it.
        p = re.sub(r"\.\{([01]),\d{3,}\}\??", lambda m: ".*" if m[1] == "0" else ".+", p)
        out.append(p)
    return "\n".join(out) + "\n"


def measure(argv: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) and the last output line of one run."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace").strip().splitlines()
    return wall, usage.ru_maxrss / 1024, text[-1] if text else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--file", type=Path, default=ROOT / "benchmarks" / "out" / "big.log")
    args = ap.parse_args()

    size = args.size_mb << 20
    if not args.file.exists() or args.file.stat().st_size < size:
        args.file.parent.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        generate(args.file, size)
        print(f"generated {args.file} ({args.file.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.0f} s")
    mb = args.file.stat().st_size / 1e6
    patterns = args.file.parent / "patterns.ere"
    patterns.write_text(grep_patterns())
    subprocess.run(["cat", str(args.file)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache

    tools = {
        "firedup diagnose --json": [sys.executable, "-m", "firedup", "diagnose", "--json", str(args.file)],
        # the same finished file followed, no writer: its verdict after the 2 s quiet period
        "firedup watch --json": [sys.executable, "-m", "firedup", "watch", "--json", str(args.file)],
        f"grep -E -c -f ({len(patterns.read_text().splitlines())} fatal+ready patterns)":
            ["grep", "-E", "-c", "-f", str(patterns), str(args.file)],
    }
    results = {name: [] for name in tools}
    for _ in range(args.repeat):  # interleaved, so both see the same machine
        for name, argv in tools.items():
            results[name].append(measure(argv))

    print(f"\nfile: {mb:.0f} MB, {args.repeat} runs each, best run shown\n")
    print("| tool | MB/s | seconds | peak RSS (MB) | result |")
    print("|---|---:|---:|---:|---|")
    for name, runs in results.items():
        wall, rss, text = min(runs)
        if name.startswith("firedup"):
            text = re.sub(r'.*"outcome": "(\w+)", "cause": "?(\w+)"?.*"phase": "(\w+)".*', r"\1 / \2 / \3", text)
        text = text[:90]
        print(f"| {name} | {mb / wall:.0f} | {wall:.2f} | {max(r[1] for r in runs):.0f} | {text} |")


if __name__ == "__main__":
    main()
