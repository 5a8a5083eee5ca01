"""Compare benchmark runs from the ledger: side by side with deltas, refusing
workloads that differ, telling a real change from run-to-run noise when the
runs were repeated, and showing what changed in configuration and environment."""

from __future__ import annotations

import math
import statistics
from typing import Any

from ..ledger import history

# Keys shown, and whether higher is better.
KEYS = (("output_throughput", True), ("spec_decode_acceptance_rate", True), ("spec_decode_acceptance_length", True),
        ("request_throughput", True), ("total_token_throughput", True),
        ("request_goodput", True), ("mean_ttft_ms", False), ("median_ttft_ms", False), ("p99_ttft_ms", False),
        ("mean_tpot_ms", False), ("median_tpot_ms", False), ("p99_tpot_ms", False), ("mean_itl_ms", False),
        ("p99_itl_ms", False), ("mean_e2el_ms", False), ("p99_e2el_ms", False), ("failed", False))
# Workload fields that may differ without making runs incomparable.
NEUTRAL = {"warmup"}
NOISE_SIGMAS = 2.0


def aggregate(repeats: list[dict[str, Any]]) -> dict[str, Any]:
    """One metrics dict from repeated runs: means, with the repeats kept."""
    out: dict[str, Any] = dict(repeats[-1])
    for key, value in repeats[-1].items():
        values = [r.get(key) for r in repeats]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values) and len(set(values)) > 1:
            out[key] = statistics.fmean(values)
    out["repeats"] = repeats
    return out


def workload_differences(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    keys = sorted((set(a["workload"]) | set(b["workload"])) - NEUTRAL)
    out = [(k, a["workload"].get(k), b["workload"].get(k)) for k in keys if a["workload"].get(k) != b["workload"].get(k)]
    for key in ("client", "model"):
        if a["metrics"].get(key) != b["metrics"].get(key):
            out.append((key, a["metrics"].get(key), b["metrics"].get(key)))
    return out


def _samples(run: dict[str, Any], key: str) -> list[float]:
    repeats = run["metrics"].get("repeats") or [run["metrics"]]
    return [r[key] for r in repeats if isinstance(r.get(key), (int, float))]


def judge(a: list[float], b: list[float], higher_is_better: bool) -> str:
    """regression, improvement, within noise, or unknown noise (no repeats)."""
    if not a or not b:
        return ""
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    if mean_a == mean_b:
        return "same"
    if len(a) < 2 or len(b) < 2:
        return "noise unknown (use --repeat)"
    spread = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
    if abs(mean_b - mean_a) <= NOISE_SIGMAS * spread:
        return "within noise"
    better = (mean_b > mean_a) == higher_is_better
    return "improvement" if better else "regression"


def compare(runs: list[dict[str, Any]]) -> dict[str, Any]:
    base = runs[0]
    rows = []
    for key, higher in KEYS:
        a = _samples(base, key)
        if not a:
            continue
        row: dict[str, Any] = {"metric": key, "values": [statistics.fmean(_samples(r, key)) if _samples(r, key) else None
                                                          for r in runs], "changes": []}
        for other in runs[1:]:
            b = _samples(other, key)
            mean_a, mean_b = statistics.fmean(a), statistics.fmean(b) if b else None
            delta = (mean_b - mean_a) / mean_a * 100 if b and mean_a else None
            row["changes"].append({"delta_pct": delta, "verdict": judge(a, b, higher)})
        rows.append(row)
    changes = [
        [c for c in history.diff(base, other) if c["section"] != "phases"] for other in runs[1:]
    ]
    return {"runs": [r["id"] for r in runs], "rows": rows, "changes": changes}
