"""Benchmark metrics with the definitions and JSON key names of
``vllm bench serve`` (TTFT, TPOT, ITL per streamed chunk, E2EL; mean, median,
std, p99 and any other percentiles; request, output and total token
throughput; failed; request goodput), computed from per-request raw data that
is kept, so other definitions can be recomputed."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._exceptions import InputError


@dataclass
class RequestResult:
    ok: bool
    start: float  # seconds since the run began
    latency: float = 0.0  # end to end
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)  # between streamed chunks after the first
    prompt_tokens: int = 0  # from the server's usage
    output_tokens: int = 0  # from the server's usage
    chunks: int = 0  # streamed chunks with content: the client-side count
    error: str = ""
    id: str = ""  # the server's response id, to find the request in the server's log
    usage: bool = True  # False: the server sent no usage, so output_tokens is the count of chunks
    asked_input: int | None = None  # input tokens asked (random prompts)
    asked_output: int = 0  # max_tokens asked

    def to_dict(self) -> dict[str, Any]:
        return {**vars(self), "itl": list(self.itl)}


def checked_percentile(q: float) -> float:
    """``q``, refused unless in [0, 100] (numpy.percentile's range, which vllm bench serve uses)."""
    if not 0 <= q <= 100:  # NaN too
        raise InputError(f"a percentile is between 0 and 100, not {q:g}")
    return q


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks, as numpy.percentile does by default."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _summary(name: str, seconds: list[float], percentiles: Sequence[float]) -> dict[str, float]:
    ms = [1000 * s for s in seconds]
    out = {
        f"mean_{name}_ms": statistics.fmean(ms) if ms else 0.0,
        f"median_{name}_ms": statistics.median(ms) if ms else 0.0,
        f"std_{name}_ms": statistics.pstdev(ms) if ms else 0.0,
    }
    for q in percentiles:
        out[f"p{q:g}_{name}_ms"] = percentile(ms, q)
    return out


def compute(results: list[RequestResult], duration: float, *, percentiles: Sequence[float] = (99,),
            goodput: dict[str, float] | None = None) -> dict[str, Any]:
    """The metrics of one run. ``goodput`` holds SLOs in ms: ttft, tpot, e2el."""
    ok = [r for r in results if r.ok]
    ttfts, tpots, itls, e2els = [], [], [], []
    good = 0
    for r in ok:
        tpot = (r.latency - r.ttft) / (r.output_tokens - 1) if r.output_tokens > 1 else None
        if tpot is not None:
            tpots.append(tpot)
        ttfts.append(r.ttft)
        itls.extend(r.itl)
        e2els.append(r.latency)
        if goodput and all(
            value is None or value * 1000 <= goodput[slo]
            for slo, value in (("ttft", r.ttft), ("tpot", tpot), ("e2el", r.latency)) if slo in goodput
        ):
            good += 1
    total_in = sum(r.prompt_tokens for r in ok)
    total_out = sum(r.output_tokens for r in ok)
    out: dict[str, Any] = {
        "duration": duration,
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / duration if duration else 0.0,
        "request_goodput": good / duration if goodput and duration else None,
        "output_throughput": total_out / duration if duration else 0.0,
        "total_token_throughput": (total_in + total_out) / duration if duration else 0.0,
    }
    percentiles = list(percentiles)
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        out.update(_summary(name, values, percentiles))
    out.update(_peaks(ok))
    return out


def _peaks(ok: list[RequestResult]) -> dict[str, float]:
    """The busiest second: output tokens streamed in it, and requests active
    in it (vllm bench serve's max_output_tokens_per_s and max_concurrent_requests)."""
    if not ok:
        return {"max_output_tokens_per_s": 0.0, "max_concurrent_requests": 0}
    first = min(r.start for r in ok)
    seconds = math.ceil(max(r.start + r.latency for r in ok) - first) + 1
    tokens = [0] * seconds
    active = [0] * seconds
    for r in ok:
        at = r.start + r.ttft
        for gap in [0.0, *r.itl]:
            at += gap
            if 0 <= int(at - first) < seconds:
                tokens[int(at - first)] += 1
        for second in range(int(r.start - first), int(r.start + r.latency - first) + 1):
            active[second] += 1
    return {"max_output_tokens_per_s": float(max(tokens)), "max_concurrent_requests": max(active)}


def vllm_arrays(requests: list[dict[str, Any]]) -> dict[str, list]:
    """The per-request lists of a ``vllm bench serve`` result file, from the
    raw data, for tools that read one."""
    return {"input_lens": [r["prompt_tokens"] for r in requests], "output_lens": [r["output_tokens"] for r in requests],
            "ttfts": [r["ttft"] for r in requests], "itls": [r["itl"] for r in requests],
            "latencies": [r["latency"] for r in requests], "start_times": [r["start"] for r in requests],
            "errors": [r["error"] for r in requests]}


def count_disagreement(results: list[RequestResult]) -> float:
    """How far the client's count of streamed chunks is from the server's
    usage count of output tokens (a fraction of the usage total)."""
    usage = sum(r.output_tokens for r in results if r.ok and r.usage)
    chunks = sum(r.chunks for r in results if r.ok and r.usage)
    return abs(chunks - usage) / usage if usage else 0.0
