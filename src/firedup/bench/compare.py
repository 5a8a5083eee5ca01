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
# Two-sided 95% critical values of Student's t by degrees of freedom: with the
# handful of repeats a benchmark gets, 2 sigmas would call noise a change.
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
       2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


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
    """regression, improvement, within noise, or unknown noise (no repeats):
    a change counts when Welch's t-test puts it outside 95% of run-to-run noise."""
    if not a or not b:
        return ""
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    if mean_a == mean_b:
        return "same"
    if len(a) < 2 or len(b) < 2:
        return "noise unknown (use --repeat)"
    # Welch's t-test: the two runs' repeats may spread differently.
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    spread = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if va + vb else math.inf
    critical = T95[int(df) - 1] if df < len(T95) else 1.96
    if abs(mean_b - mean_a) <= critical * spread:
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
    notes = []
    one_start = [r["id"] for r in runs if r["metrics"].get("repeats_across") == "one server start"]
    if one_start and any(c["verdict"] in ("regression", "improvement") for row in rows for c in row["changes"]):
        notes.append(f"the repeats of run {', '.join(map(str, one_start))} shared one server start: the noise does "
                     "not hold start-to-start variation (firedup run --repeat K --relaunch measures it)")
    return {"runs": [r["id"] for r in runs], "rows": rows, "changes": changes, "notes": notes}
