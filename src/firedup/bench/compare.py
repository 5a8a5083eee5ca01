"""Compare benchmark runs from the ledger: side by side with deltas, refusing
workloads that differ, telling a real change from run-to-run noise when the
runs were repeated, and showing what changed in configuration and environment.

A change is called when it is both unlikely under the noise, with the
family-wise error held at 5% across every metric compared, and at least the
minimum effect worth calling. The metrics are tested as a gatekeeper and its
family: output throughput first, at 5%; the others, with Holm's correction at
5%, only when throughput changed. With the three or so repeats a benchmark
gets, Holm over all fourteen alone would call only an effect several times the
noise; the gate keeps the error at 5% and the headline metric's power whole,
at the price of not calling a change that leaves throughput alone. Repeats that were interleaved with the
other run's (``firedup run -- A --vs B``) are compared pair by pair, so that
drift in the machine's load falls on both sides; repeats that were not cannot
tell drift from an effect, and the report says so."""

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
# Workload fields that may differ without making runs incomparable (the
# tokenizer by its path: a different model is told by the model's name).
NEUTRAL = {"warmup", "tokenizer"}
ALPHA = 0.05  # family-wise, over the metrics compared
GATE = "output_throughput"  # tested first; the other metrics only when it changed
MIN_EFFECT_PCT = 5.0  # below this a change is not worth calling, however sure


def aggregate(repeats: list[dict[str, Any]]) -> dict[str, Any]:
    """One metrics dict from repeated runs: means, with the repeats kept."""
    out: dict[str, Any] = dict(repeats[-1])
    for key, value in repeats[-1].items():
        values = [r.get(key) for r in repeats]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(numbers) == len(values) and len(set(numbers)) > 1:
            out[key] = statistics.fmean(numbers)
    out["repeats"] = repeats
    return out


def workload_differences(a: dict[str, Any], b: dict[str, Any],
                         defaults: dict[str, Any] | None = None) -> list[tuple[str, Any, Any]]:
    """``defaults``: the value a field had before runs recorded it."""
    defaults = defaults or {}
    keys = sorted((set(a["workload"]) | set(b["workload"])) - NEUTRAL)
    values = [(k, a["workload"].get(k, defaults.get(k)), b["workload"].get(k, defaults.get(k))) for k in keys]
    out = [(k, x, y) for k, x, y in values if x != y]
    for key in ("client", "model"):
        if a["metrics"].get(key) != b["metrics"].get(key):
            out.append((key, a["metrics"].get(key), b["metrics"].get(key)))
    return out


def _samples(run: dict[str, Any], key: str) -> list[float]:
    repeats = run["metrics"].get("repeats") or [run["metrics"]]
    return [r[key] for r in repeats if isinstance(r.get(key), (int, float))]


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (a continued fraction, Lentz's method)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast only below this point
        return 1.0 - _betainc(b, a, 1.0 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-14:
            break
    return front * f


def t_pvalue(t: float, df: float) -> float:
    """Two-sided p-value of Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return _betainc(df / 2, 0.5, df / (df + t * t))


def pvalue(a: list[float], b: list[float], paired: bool) -> float | None:
    """How likely a difference this large is under the noise alone: a paired
    t-test over interleaved repeats (pair i: a[i], b[i]), else Welch's (the
    two runs' repeats may spread differently). Positive values are compared
    as logarithms: a server's noise multiplies (a start that runs at half
    speed halves throughput and doubles latencies), so ratios are what the
    repeats share. None: too few repeats."""
    if a and b and min(a + b) > 0:
        a, b = [math.log(x) for x in a], [math.log(x) for x in b]
    if paired:
        d = [y - x for x, y in zip(a, b)]
        if len(d) < 2:
            return None
        mean, sd = statistics.fmean(d), statistics.stdev(d)
        if sd == 0:
            return 1.0 if mean == 0 else 0.0
        return t_pvalue(mean / (sd / math.sqrt(len(d))), len(d) - 1)
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return 1.0 if statistics.fmean(a) == statistics.fmean(b) else 0.0
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return t_pvalue((statistics.fmean(b) - statistics.fmean(a)) / math.sqrt(va + vb), df)


def gatekept(pvalues: dict[str, float]) -> dict[str, float]:
    """Adjusted p-values of serial gatekeeping: GATE's own, and for each other
    metric the larger of GATE's and its Holm-adjusted one (without GATE, Holm alone)."""
    if GATE not in pvalues:
        return dict(zip(pvalues, holm(list(pvalues.values()))))
    gate = pvalues[GATE]
    rest = {k: p for k, p in pvalues.items() if k != GATE}
    return {GATE: gate, **{k: max(gate, p) for k, p in zip(rest, holm(list(rest.values())))}}


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment: a metric is called at family-wise level
    ALPHA when its adjusted p-value is below ALPHA."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted = [1.0] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def classify(delta_pct: float | None, p_adjusted: float | None, higher_is_better: bool,
             min_effect_pct: float = MIN_EFFECT_PCT) -> str:
    """What a metric's change is called: same, within noise, below the minimum
    effect, an improvement or a regression (not a server's verdict: that is
    the judge's)."""
    if delta_pct == 0:
        return "same"
    if p_adjusted is None:
        return "noise unknown (use --repeat)"
    if p_adjusted >= ALPHA:
        return "within noise"
    if delta_pct is None or abs(delta_pct) < min_effect_pct:
        return f"below {min_effect_pct:g}%"
    return "improvement" if (delta_pct > 0) == higher_is_better else "regression"


def interleaved(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether the two runs' repeats alternated, start by start, in one ``firedup run -- A --vs B``."""
    ia, ib = a["metrics"].get("interleaved") or {}, b["metrics"].get("interleaved") or {}
    return bool(ia) and ia.get("group") == ib.get("group") and ia.get("side") != ib.get("side")


def _pairs(a_run: dict[str, Any], b_run: dict[str, Any], a: list[float],
           b: list[float]) -> tuple[list[float], list[float]]:
    """Interleaved repeats paired by their round of starts: a round whose repeat measured nothing on
    one side pairs nothing (runs recorded before rounds were: in order)."""
    rounds_b = dict(zip(b_run["metrics"]["interleaved"].get("rounds", range(len(b))), b))
    pairs = [(x, rounds_b[r]) for r, x in zip(a_run["metrics"]["interleaved"].get("rounds", range(len(a))), a)
             if r in rounds_b]
    return [x for x, _ in pairs], [y for _, y in pairs]


def proportional(x: tuple[list[float], list[float]], y: tuple[list[float], list[float]]) -> bool:
    """Whether one metric is another times a constant in every repeat of both runs (requests, output tokens
    and all tokens over one duration, when every repeat sent the same): then both are one test."""
    xs, ys = x[0] + x[1], y[0] + y[1]
    if len(x[0]) != len(y[0]) or len(xs) != len(ys) or not xs or min(xs + ys) <= 0:
        return False
    return all(math.isclose(v / u, ys[0] / xs[0], rel_tol=1e-9) for u, v in zip(xs, ys))


def compare(runs: list[dict[str, Any]], min_effect_pct: float = MIN_EFFECT_PCT) -> dict[str, Any]:
    base = runs[0]
    rows: list[dict[str, Any]] = []
    for key, higher in KEYS:
        if _samples(base, key):
            rows.append({"metric": key, "higher_is_better": higher, "changes": [],
                         "values": [statistics.fmean(_samples(r, key)) if _samples(r, key) else None for r in runs]})
    notes: list[str] = []
    tests: list[dict[str, Any]] = []
    for other in runs[1:]:
        paired = interleaved(base, other)
        tests.append({"paired": paired, "correction": f"{GATE} first, then holm", "alpha": ALPHA,
                      "min_effect_pct": min_effect_pct})
        changes: list[dict[str, Any]] = []
        samples: dict[str, tuple[list[float], list[float]]] = {}
        for row in rows:
            a, b = _samples(base, row["metric"]), _samples(other, row["metric"])
            mean_a = statistics.fmean(a)
            delta = (statistics.fmean(b) - mean_a) / mean_a * 100 if b and mean_a else (0.0 if b == a else None)
            pairs = _pairs(base, other, a, b) if paired else (a, b)
            changes.append({"delta_pct": delta, "p": None if not b or delta == 0 else pvalue(*pairs, paired)})
            samples[row["metric"]] = pairs
        tested = {row["metric"]: c for row, c in zip(rows, changes) if c["p"] is not None}
        # A metric proportional to one tested before it is the same hypothesis: counted once in Holm's
        # family and given its p, lest the gate's throughput and the same ratio in requests disagree.
        same_as = {m: next(r for r in tested if r == m or proportional(samples[r], samples[m])) for m in tested}
        hypotheses = {m: c["p"] for m, c in tested.items() if same_as[m] == m}
        own = gatekept({m: p for m, p in hypotheses.items() if m != GATE})  # Holm alone, without the gate
        for metric, adjusted in gatekept(hypotheses).items():
            tested[metric]["p"] = adjusted  # reported adjusted: compare it with ALPHA as it stands
            if metric in own and own[metric] < ALPHA <= adjusted:
                # the gate held it back: its own test would have called it, so it is not "within noise"
                tested[metric].update(held_by_gate=True, p_own=own[metric])
        for metric, first in same_as.items():
            if first != metric:
                tested[metric].update(p=tested[first]["p"], same_test_as=first)
        for row, change in zip(rows, changes):
            change["verdict"] = classify(change["delta_pct"], change["p"], row["higher_is_better"], min_effect_pct)
            if change.get("held_by_gate") and change["delta_pct"] is not None \
                    and abs(change["delta_pct"]) >= min_effect_pct:
                change["verdict"] = f"not tested ({GATE} unchanged)"
            row["changes"].append(change)
        tests[-1].update(metrics_tested=len(tested), hypotheses=len(set(same_as.values())))
        if not paired and tested:
            notes.append(f"runs {base['id']} and {other['id']} were not interleaved: drift in the machine's load "
                         "between them cannot be told from an effect (firedup run --repeat K -- CMD_A --vs CMD_B "
                         "alternates their server starts)")
    differences = [
        [c for c in history.diff(base, other) if c["section"] != "phases"] for other in runs[1:]
    ]
    for r in runs:
        health = r["metrics"].get("health") or {}
        if health.get("valid") is False:
            notes.append(f"run {r['id']} is not the server's number (" + "; ".join(health.get("problems") or ())
                         + "): this comparison says what the client measured, not what the server does")
    one_start = [r["id"] for r in runs if r["metrics"].get("repeats_across") == "one server start"]
    if one_start and any(c["verdict"] in ("regression", "improvement") for row in rows for c in row["changes"]):
        notes.append(f"the repeats of run {', '.join(map(str, one_start))} shared one server start: the noise does "
                     "not hold start-to-start variation (firedup run --repeat K --relaunch measures it)")
    return {"runs": [r["id"] for r in runs], "rows": rows, "tests": tests, "changes": differences, "notes": notes}
