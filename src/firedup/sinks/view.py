"""The ledger for people: a table of runs, one run with its phases as bars,
the changes between two runs."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .._outcome import Outcome
from ..bench.compare import GATE
from ..ledger.history import shown
from .summary import printable

BAR_WIDTH = 40
MAX_ENV_VALUE = 100  # characters of an environment value that show prints (--json keeps it whole)
# A changed value that diff and compare print: up to this many characters (a command line whole; vLLM's
# compilation_config, 1,500, cut: --json keeps it whole), diff's table folding it in lines of DIFF_WIDTH.
MAX_CHANGED_VALUE = 400
DIFF_WIDTH = 60


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def _outcome(name: str) -> Text:
    outcome = Outcome(name)
    return Text(f"{outcome.mark} {outcome}", outcome.style)


def _run_outcome(run: dict[str, Any]) -> Text:
    """A launch's or watch's verdict; a benchmark's measurement: measured, or invalid (the client was the
    bottleneck: recorded as outcome "incomplete"), with whether it was cut short and how many requests failed."""
    if "damaged" in run:  # its row holds what cannot be read: not a measurement to vouch for
        return Text("? damaged", "bold yellow")
    if run["kind"] != "bench":
        return _outcome(run["outcome"])
    metrics = run.get("metrics") or {}
    valid = run["outcome"] == "ready"
    words = ["measured" if valid else "invalid"]
    if metrics.get("cut_short"):
        words.append("cut short")
    if metrics.get("failed"):
        words.append(f"{metrics['failed']:g} failed")
    mark, style = ("✓", "bold green") if valid and len(words) == 1 else ("!", "bold yellow") if valid else (
        "✗", "bold red")
    return Text(f"{mark} {', '.join(words)}", style)


def runs_table(runs: list[dict[str, Any]], console: Console) -> None:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("run", "started", "kind", "name", "host", "server", "outcome", "cause", "took", "config id"):
        table.add_column(column, no_wrap=column not in ("name",))
    for r in runs:
        outcome = _run_outcome(r)
        took = f"{r['elapsed']:.0f} s" if r.get("elapsed") else ""
        table.add_row(str(r["id"]), _when(r["started"]), r["kind"], r.get("name") or "", r.get("host") or "local",
                      r.get("server") or "", outcome, r.get("cause") or "", took, r.get("fingerprint") or "")
    console.print(table)


def show(run: dict[str, Any], console: Console) -> None:
    head = Text(f"run {run['id']}  ", "bold")
    head.append(_run_outcome(run))
    if run.get("cause"):
        head.append(f"  cause: {run['cause']}", "bold")
    console.print(head)
    for label, value in (("started", _when(run["started"])), ("kind", run["kind"]), ("name", run.get("name")),
                         ("host", run.get("host") or "local"), ("server", run.get("server")),
                         ("version", run.get("version")), ("command", " ".join(run["command"])),
                         ("log", run.get("log")), ("config id", run.get("fingerprint"))):
        if value:
            console.print(Text(f"  {label}: ", "dim") + Text(str(value)), overflow="fold")
    if run.get("evidence"):
        console.print(Text(f"  line {run['evidence']['lineno']}: ", "dim") + Text(printable(run["evidence"]["line"])))
    phases = {p: s for p, s in run["phases"].items() if p != "serving"}
    if phases:
        longest = max(phases.values()) or 1.0
        console.print(Text("  phases:", "dim"))
        for phase, seconds in phases.items():
            bar = "█" * max(1, round(BAR_WIDTH * seconds / longest)) if seconds > 0 else ""
            console.print(Text(f"    {phase:<12} ") + Text(bar, "cyan") + Text(f" {seconds:.1f} s", "dim"))
    env = run.get("environment") or {}
    if env.get("packages"):
        console.print(Text("  packages: ", "dim") + Text(", ".join(f"{k} {v}" for k, v in env["packages"].items())),
                      overflow="fold")
    if env.get("gpus"):
        console.print(Text("  gpus: ", "dim") + Text(f"{', '.join(env['gpus'])} (driver {env.get('driver')})"))
    if env.get("env"):
        console.print(Text("  env: ", "dim") + Text(" ".join(f"{k}={_short(v)}" for k, v in env["env"].items())),
                      overflow="fold")
    if run["config"]:
        console.print(Text("  config: ", "dim") + Text(", ".join(f"{k}={v}" for k, v in run["config"].items())),
                      overflow="fold")
    metrics = run.get("metrics") or {}
    if run["kind"] == "bench" and metrics.get("health"):
        _show_bench(run, metrics, console)


def _show_bench(run: dict[str, Any], metrics: dict[str, Any], console: Console) -> None:
    """A benchmark run's workload and numbers, as bench printed them (means over its repeats)."""
    workload = run.get("workload") or {}
    console.print(Text("  workload: ", "dim") + Text(", ".join(f"{k}={v}" for k, v in workload.items()
                                                               if v is not None and k != "dataset_sha256")),
                  overflow="fold")
    repeats = len(metrics.get("repeats") or ()) or 1
    if repeats > 1:
        console.print(Text("  repeats: ", "dim") + Text(f"{repeats} ({metrics.get('repeats_across', '')}); "
                                                        "the numbers are their means"))
    notes = [f"cut short: {metrics['cut_short']}"] if metrics.get("cut_short") else []
    notes += [f"repeat {f['repeat']} measured nothing and is left out: {f['error']}"
              for f in metrics.get("failed_repeats", ())]
    bench_report({**metrics, "warnings": notes}, console)


def _short(value: object, limit: int = MAX_ENV_VALUE) -> str:
    """A value short enough to read (CUDA images set NVIDIA_REQUIRE_CUDA to over 1,000 characters,
    vLLM prints a compilation_config of 1,500); --json keeps it whole."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit - 20]}… ({len(text)} characters)"


def diff(a: int, b: int, changes: list[dict[str, Any]], console: Console) -> None:
    if not changes:
        console.print(f"runs {a} and {b}: same configuration, environment and phase durations")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("", ""):
        table.add_column(column, overflow="fold")
    for column in (f"run {a}", f"run {b}"):
        table.add_column(column, overflow="fold", max_width=DIFF_WIDTH)
    for c in changes:
        old, new = c["a"], c["b"]
        if c["section"] == "phases":
            old = f"{old:.1f} s" if old is not None else "-"
            new = f"{new:.1f} s" if new is not None else "-"
        table.add_row(c["section"], c["key"], *("-" if v is None else _short(v, MAX_CHANGED_VALUE) for v in (old, new)))
    console.print(table)


BENCH_LINES = (
    ("Successful requests", "completed", "{:.0f}"), ("Failed requests", "failed", "{:.0f}"),
    ("Benchmark duration (s)", "duration", "{:.2f}"), ("Input tokens asked", "input_tokens_asked", "{:.0f}"),
    ("Total input tokens", "total_input_tokens", "{:.0f}"),
    ("Total generated tokens", "total_output_tokens", "{:.0f}"),
    ("Request throughput (req/s)", "request_throughput", "{:.2f}"),
    ("Request goodput (req/s)", "request_goodput", "{:.2f}"),
    ("Output token throughput (tok/s)", "output_throughput", "{:.2f}"),
    ("Total token throughput (tok/s)", "total_token_throughput", "{:.2f}"),
)


def bench_report(result: dict[str, Any], console: Console) -> None:
    """The numbers of one benchmark, laid out like `vllm bench serve` prints them."""
    m = result
    console.print(Text("{s:=^50}".format(s=" Serving Benchmark Result "), "bold"))
    for label, key, fmt in BENCH_LINES:
        if m.get(key) is not None:
            console.print(f"{label + ':':<40}{fmt.format(m[key]):<10}")
    for name, title in (("ttft", "Time to First Token"), ("tpot", "Time per Output Token (excl. 1st token)"),
                        ("itl", "Inter-token Latency"), ("e2el", "End-to-end Latency")):
        console.print(Text(f"{title:-^50}", "bold"))
        for key in sorted(k for k in m if k.endswith(f"_{name}_ms")):
            stat = key.split("_")[0]
            label = {"mean": "Mean", "median": "Median", "std": "Std"}.get(stat, stat.upper())
            console.print(f"{f'{label} {name.upper()} (ms):':<40}{m[key]:<10.2f}")
    if result.get("speculative"):
        s = result["speculative"]
        console.print(Text("{s:-^50}".format(s="Speculative decoding"), "bold"))
        for label, key, fmt in (("Acceptance rate (%)", "acceptance_rate", "{:.2f}"),
                                ("Acceptance length", "acceptance_length", "{:.2f}"),
                                ("Drafts", "num_drafts", "{:.0f}"), ("Draft tokens", "draft_tokens", "{:.0f}"),
                                ("Accepted tokens", "accepted_tokens", "{:.0f}")):
            if s.get(key) is not None:
                console.print(f"{label + ':':<40}{fmt.format(s[key]):<10}")
        if s.get("per_position_acceptance_rates"):
            console.print("Per-position acceptance (%):")
            for i, rate in enumerate(s["per_position_acceptance_rates"]):
                console.print(f"{f'  Position {i}:':<40}{100 * rate:<10.2f}")
        console.print(Text(f"(from {s['source']})", "dim"))
    console.print("=" * 50)
    if m.get("model_source"):
        console.print(Text(f"model: {m['model']} (from {m['model_source']})", "dim"))
    if m.get("input_tokens_by"):
        console.print(Text(f"input lengths: {m['input_tokens_by']}", "dim"))
    run = result["health"]  # every repeat's: the run is the server's number only if each is
    health = run if "client_cpu" in run else result["repeats"][-1]["health"]  # the client, as last measured
    drawn = health.get("drawn_rate", health.get("target_rate"))
    rate = (f" · sent {health['achieved_rate']:.1f} req/s of {drawn:.1f} drawn "
            f"({health['target_rate']:g} asked)" if health.get("target_rate") else "")
    console.print(Text(f"client: {100 * health['client_cpu']:.0f}% of a core · event-loop lag p99 "
                       f"{health['loop_lag_p99_ms']:.1f} ms · socket read lag p99 "
                       f"{health.get('read_lag_p99_ms', 0.0):.1f} ms{rate}", "dim"))
    if not run["valid"]:
        console.print(Text("not the server's number (" + "; ".join(run["problems"]) + ")", "bold red"))
    for warning in result.get("warnings", ()):
        console.print(Text(f"note: {warning}", "yellow"))


CALLED = ("regression", "improvement")
# What a comparison that called no change concludes, by its headline metric's verdict ("below N%" otherwise).
UNCALLED = {"same": "no change", "within noise": "no change beyond noise",
            "noise unknown (use --repeat)": "noise unknown (a run of one repeat: --repeat K tells a change from noise)"}


def _headline(report: dict[str, Any], i: int) -> Text | None:
    """The conclusion on the (i+1)-th run against the first, before its numbers:
    a large Δ within the noise is no finding, and must not read as one."""
    changes = {row["metric"]: row["changes"][i] for row in report["rows"]}
    if not changes:
        return None
    called = {m: c for m, c in changes.items() if c["verdict"] in CALLED}
    shown = called or {m: changes[m] for m in [GATE if GATE in changes else next(iter(changes))]}
    if called:
        said = ", ".join(sorted({c["verdict"] for c in called.values()}))
    else:
        said = UNCALLED.get(next(iter(shown.values()))["verdict"], "no change worth calling: under --min-effect")
    numbers = "; ".join(f"{m} {c['delta_pct']:+.1f}%" + (f", p {c['p']:.3f}" if c["p"] is not None else "")
                        for m, c in shown.items() if c["delta_pct"] is not None)
    ids = report["runs"]
    return Text(f"run {ids[i + 1]} against run {ids[0]}: {said}" + (f" ({numbers})" if numbers else ""),
                "bold" if called else "")


def compare_table(report: dict[str, Any], console: Console) -> None:
    for i in range(len(report["runs"]) - 1):
        headline = _headline(report, i)
        if headline is not None:
            console.print(headline)
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("metric")
    ids = report["runs"]
    table.add_column(f"run {ids[0]}", justify="right")
    for other in ids[1:]:
        table.add_column(f"run {other}", justify="right")
        table.add_column("Δ", justify="right")
        table.add_column("p (adj.)", justify="right")
        table.add_column("")
    for row in report["rows"]:
        cells = [row["metric"], _num(row["values"][0])]
        for value, change in zip(row["values"][1:], row["changes"]):
            delta, p = change["delta_pct"], change.get("p")
            style = {"regression": "red", "improvement": "green"}.get(change["verdict"], "dim")
            cells += [_num(value), Text(f"{delta:+.1f}%", style) if delta is not None else "",
                      f"{p:.3f}" if p is not None else "", Text(change["verdict"], style)]
        table.add_row(*cells)
    console.print(table)
    for i, (other, test) in enumerate(zip(ids[1:], report.get("tests", ()))):
        how = ("paired t-test over interleaved starts" if test["paired"] else "Welch's t-test over separate runs")
        shared: dict[str, list[str]] = {}
        for row in report["rows"]:
            if "same_test_as" in row["changes"][i]:
                shared.setdefault(row["changes"][i]["same_test_as"], []).append(row["metric"])
        tests = "; ".join(f"{', '.join(followers)} share {first}'s, the same ratio in every repeat"
                          for first, followers in shared.items())
        tests = f" ({test['hypotheses']} tests: {tests})" if tests else ""
        if not test["metrics_tested"]:
            if any(row["changes"][i]["verdict"] != "same" for row in report["rows"]):
                console.print(Text(f"run {other}: no metric could be tested (one repeat on a side has no noise to "
                                   "test against: --repeat K), so no change is called", "dim"))
            continue
        console.print(Text(f"run {other}: a change is called when |Δ| ≥ {test['min_effect_pct']:g}% (--min-effect) "
                           f"and p < {test['alpha']:g} ({how}; of the {test['metrics_tested']} metrics tested{tests}, "
                           "output throughput first, the others with Holm's correction only when it changed)", "dim"))
    for other, changes in zip(ids[1:], report["changes"]):
        if changes:
            said = (f"{c['key']} " + " → ".join(_short(shown(c[side]), MAX_CHANGED_VALUE) for side in "ab")
                    for c in changes)
            console.print(Text(f"changed from run {ids[0]} to run {other}: ", "bold") + Text("; ".join(said)))
    for note in report.get("notes", ()):
        console.print(Text(f"note: {note}", "yellow"))


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if abs(value) < 1000 else f"{value:.0f}"
