"""Pictures of a benchmark (throughput and latency over time) and of a
comparison (key metrics side by side). Needs matplotlib (the "plot" extra)."""

from __future__ import annotations

from typing import Any

from .._exceptions import PlotError


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("--plot needs matplotlib: pip install 'firedup[plot]'") from None
    return plt


def bench(requests: list[dict[str, Any]], path: str, title: str) -> None:
    plt = _pyplot()
    done = [r for r in requests if r["ok"]]
    if not done:
        raise PlotError("no request completed: nothing to plot")
    end = max(r["start"] + r["latency"] for r in done)
    width = max(end / 60, 0.05)  # about 60 bins, whatever the run's length
    bins = [0.0] * (int(end / width) + 1)
    for r in done:
        bins[int((r["start"] + r["latency"]) / width)] += r["output_tokens"] / width
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    top.step([i * width for i in range(len(bins))], bins, where="post")
    top.set_ylabel("output tokens / s")
    top.set_title(title)
    bottom.scatter([r["start"] for r in done], [1000 * r["ttft"] for r in done], s=6, label="TTFT")
    bottom.scatter([r["start"] for r in done], [1000 * r["latency"] for r in done], s=6, label="E2EL")
    failed = [r["start"] for r in requests if not r["ok"]]
    if failed:
        bottom.scatter(failed, [0] * len(failed), s=12, marker="x", color="red", label="failed")
    bottom.set_ylabel("ms")
    bottom.set_xlabel("seconds into the run (throughput by request end, latency by request start)")
    bottom.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def comparison(report: dict[str, Any], path: str) -> None:
    plt = _pyplot()
    rows = [r for r in report["rows"] if all(v is not None for v in r["values"])][:8]
    fig, axes = plt.subplots(1, len(rows), figsize=(2.2 * len(rows), 3.5))
    for ax, row in zip(axes if len(rows) > 1 else [axes], rows):
        ax.bar([f"run {i}" for i in report["runs"]], row["values"], color="tab:blue")
        ax.set_title(row["metric"], fontsize=8)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
