"""``firedup.run``: the whole loop. Launch a server, wait until it is ready,
benchmark it, record it in the ledger, stop it; or two configurations, their
starts interleaved, compared pair by pair."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ._exceptions import InputError, ServerError
from ._servers import SlurmJob, Start, launch
from .bench import session
from .bench.compare import MIN_EFFECT_PCT, compare
from .bench.metrics import RequestResult
from .bench.run import BenchResult
from .bench.workload import Workload
from .defaults import STALL
from .ledger.store import Ledger
from .sinks import Sink

VS = "--vs"  # firedup run [options] -- CMD_A --vs CMD_B

@dataclass
class RunResult:
    """What ``firedup.run`` measured: the recorded benchmark of each
    configuration ("A", and "B" beside it for ``vs``), the order their servers
    were started in, and for two configurations their comparison."""

    benches: dict[str, session.Bench]
    order: str = "A"
    comparison: dict[str, Any] | None = None
    results: list[BenchResult] = field(default_factory=list)  # every repeat, in the order measured

    @property
    def valid(self) -> bool:
        """Whether every repeat is the server's number (the client kept up)."""
        return all(r.valid for r in self.results)


def run(argv: Sequence[str], *, vs: Sequence[str] | None = None, workload: Workload | None = None, repeat: int = 1,
        relaunch: bool = False, model: str | None = None, api_key: str | None = None,
        percentiles: Sequence[float] = (99,), goodput: dict[str, float] | None = None, name: str | None = None,
        server: str | None = None, url: str | None = None, stall: float | None = STALL,
        timeout: float | None = None, port_check: bool = True, slurm: SlurmJob | None = None,
        min_effect: float = MIN_EFFECT_PCT, ledger: Ledger | str | os.PathLike | None = None,
        sinks: Sequence[Sink] = (), on_result: Callable[[RequestResult], None] | None = None) -> RunResult:
    """Launch ``argv``, wait until it is ready, benchmark it ``repeat`` times
    (on one start, or on a fresh start each with ``relaunch``), record the
    benchmark in the ledger and stop the server.

    With ``vs``, a second configuration: each is started ``repeat`` times,
    alternately (A B, B A, A B, ...: a drift in the machine's load falls on
    both, and a steady one on each first in turn), one benchmark a start,
    recorded as two runs whose repeats compare pair by pair.

    A server that does not become ready raises a ``ServerError`` carrying its
    verdict, a benchmark whose every request failed a ``BenchFailed`` (its
    server stopped); what was measured before either is not recorded."""
    ledger = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
    workload = workload or Workload()
    how = session.Measure(repeat=repeat, model=model, percentiles=percentiles, goodput=goodput, api_key=api_key)
    start = Start(name=name, server=server, url=url, stall=stall, timeout=timeout, kill_on_stall=True,
                  port_check=port_check, slurm=slurm)
    if vs is not None:
        return _interleaved(list(argv), list(vs), start, workload, how, min_effect, ledger, sinks, on_result)
    starts = repeat if relaunch else 1
    results: list[BenchResult] = []
    measured = None
    for _ in range(starts):
        measured = _start_and_bench(argv, start, workload, how, repeat // starts, ledger, sinks, on_result)
        results += measured.results
    assert measured is not None
    measured.results = results
    bench = session.record(ledger, measured, session.aggregated(results, across_starts=starts > 1))
    return RunResult({"A": bench}, results=results)


def _start_and_bench(argv: Sequence[str], start: Start, workload: Workload, how: session.Measure, count: int,
                     ledger: Ledger, sinks: Sequence[Sink],
                     on_result: Callable[[RequestResult], None] | None) -> session.Server:
    """One server start, benchmarked ``count`` times, then stopped."""
    launched = launch(argv, start, sinks=sinks, ledger=ledger)
    try:
        verdict = launched.verdict
        if verdict.outcome != "ready":
            raise ServerError.of(verdict, launched.record.log, launched.note)
        if not launched.record.url:
            raise InputError("the server's URL is not known: pass --url")
        server = session.Server(launched.record.url, ledger.get(verdict.run_id) if verdict.run_id else None,
                                launched.record.name)
        session.measure(server, workload, how, count, on_result)
        return server
    finally:
        launched.stop()


def _interleaved(a: list[str], b: list[str], start: Start, workload: Workload, how: session.Measure,
                 min_effect: float, ledger: Ledger, sinks: Sequence[Sink],
                 on_result: Callable[[RequestResult], None] | None) -> RunResult:
    if not a or not b:
        raise InputError(f"run takes two commands at most: firedup run [options] -- CMD_A {VS} CMD_B")
    if how.repeat < 2:
        raise InputError("an interleaved run needs --repeat 2 or more (the pairs are the noise)")
    commands = {"A": a, "B": b}
    servers: dict[str, session.Server] = {}
    results: list[BenchResult] = []
    order = ""
    for i in range(how.repeat):
        for side in "AB" if i % 2 == 0 else "BA":
            named = replace(start, name=f"{start.name or 'ab'}-{side.lower()}")
            measured = _start_and_bench(commands[side], named, workload, how, 1, ledger, sinks, on_result)
            if side in servers:
                measured.results = servers[side].results + measured.results
            servers[side] = measured
            results += measured.results[-1:]
            order += side
    group = uuid.uuid4().hex[:12]
    benches = {}
    for side in "AB":
        metrics = session.aggregated(servers[side].results, across_starts=True)
        metrics.update(repeats_across="interleaved server starts",
                       interleaved={"group": group, "side": side, "order": order})
        benches[side] = session.record(ledger, servers[side], metrics)
    # a run the ledger refused (a disk that filled) is named by its side
    report = compare([{**b.run, "id": side if b.run_id is None else b.run_id} for side, b in benches.items()],
                     min_effect)
    return RunResult(benches, order, report, results)
