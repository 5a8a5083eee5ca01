"""``firedup.run``: the whole loop. Launch a server, wait until it is ready,
benchmark it, record it in the ledger, stop it; or two configurations, their
starts interleaved, compared pair by pair."""

from __future__ import annotations

import math
import os
import signal
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


def _command_line(value: Any, what: str, example: str) -> list[str]:
    """``value`` as one command line (strings, or paths): InputError for a string, or a list holding
    anything else (a list of command lines, as ``vs=[CMD_B]`` reads)."""
    said = f"{what} takes one command line, a list of strings ({example})"
    if isinstance(value, (str, bytes)):
        raise InputError(f"{said}, not a string: {value!r}")
    try:
        args = list(value)
    except TypeError:
        raise InputError(f"{said}, not {value!r}") from None
    odd = next((arg for arg in args if not isinstance(arg, (str, os.PathLike))), None)
    if odd is not None:
        raise InputError(f"{said}, not a list holding {odd!r}")
    return args


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
        """Whether every repeat is the server's number (the client kept up, the server stayed)."""
        return all(b.valid for b in self.benches.values())


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

    Arguments out of range (a percentile outside [0, 100], ``repeat`` under 1,
    a negative ``min_effect``) raise an ``InputError`` before anything starts.
    A server that does not become ready raises a ``ServerError`` carrying its
    verdict, a benchmark whose every request failed a ``BenchFailed`` (its
    server stopped), Ctrl-C or SIGTERM a ``KeyboardInterrupt``. The server being
    measured is stopped; the repeats measured before a failed start or an
    interruption are recorded all the same (their metrics say ``cut_short``, a
    note on the exception names the runs), and the repeat under way is dropped."""
    commands = {"A": _command_line(argv, "argv", "['vllm', 'serve', 'm']")}
    if vs is not None:
        commands["B"] = _command_line(vs, "vs", "vs=['vllm', 'serve', 'm2']")
    how = session.Measure(repeat=repeat, model=model, percentiles=percentiles, goodput=goodput, api_key=api_key)
    if not 0 <= min_effect < math.inf:  # NaN too
        raise InputError(f"min_effect must be a finite number, 0 or more, not {min_effect}")
    ledger = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
    workload = workload or Workload()
    start = Start(name=name, server=server, url=url, stall=stall, timeout=timeout, kill_on_stall=True,
                  port_check=port_check, slurm=slurm)
    if vs is None:
        starts = repeat if relaunch else 1
        plan = [("A", start, repeat // starts)] * starts
    else:
        if not argv or not vs:
            raise InputError(f"run takes two commands at most: firedup run [options] -- CMD_A {VS} CMD_B")
        if repeat < 2:
            raise InputError("an interleaved run needs --repeat 2 or more (the pairs are the noise)")
        plan = [(side, replace(start, name=f"{start.name or 'ab'}-{side.lower()}"), 1)
                for i in range(repeat) for side in ("AB" if i % 2 == 0 else "BA")]
    servers: dict[str, session.Server] = {}
    results: list[BenchResult] = []  # every repeat, in the order measured
    rounds: dict[str, list[int]] = {side: [] for side in commands}  # each repeat's round of starts (--vs)
    order = ""
    try:
        for side, named, count in plan:
            measured = _start_and_bench(commands[side], named, workload, how, count, ledger, sinks, on_result,
                                        servers, side)
            rounds[side] += [order.count(side)] * len(measured)
            results += measured
            order += side
    except (KeyboardInterrupt, ServerError) as e:
        # What was measured stays measured; a repeat cut off mid-way is not its workload's number.
        why = "interrupted" if isinstance(e, KeyboardInterrupt) else f"a server start not ready ({e.verdict.outcome})"
        session.say_recorded(e, _record(ledger, servers, rounds if vs is not None else None, order, relaunch,
                                 f"{why} after {{}} of {repeat} repeats"), servers, repeat, vs is not None)
        raise
    benches = _record(ledger, servers, rounds if vs is not None else None, order, relaunch)
    error = next(filter(None, map(session.lost, servers.values())), None)
    if error is not None:  # a configuration whose every repeat measured nothing: its first error says why
        session.say_recorded(error, benches, servers, repeat, vs is not None)
        raise error
    if vs is None:
        return RunResult(benches, results=results)
    # a run the ledger refused (a disk that filled) is named by its side
    report = compare([{**b.run, "id": side if b.run_id is None else b.run_id} for side, b in benches.items()],
                     min_effect)
    return RunResult(benches, order, report, results)


def _start_and_bench(argv: Sequence[str], start: Start, workload: Workload, how: session.Measure, count: int,
                     ledger: Ledger, sinks: Sequence[Sink], on_result: Callable[[RequestResult], None] | None,
                     servers: dict[str, session.Server], side: str) -> list[BenchResult]:
    """One server start, benchmarked ``count`` times (each kept on ``servers[side]`` once measured), then stopped."""
    launched = launch(argv, start, sinks=sinks, ledger=ledger)
    try:
        verdict = launched.verdict
        if verdict.outcome != "ready":
            raise ServerError.of(verdict, launched.record.log, launched.note)
        if not launched.record.url:
            raise InputError("the server's URL is not known: pass --url")
        recorded = ledger.get(verdict.run_id) if verdict.run_id else None
        if side in servers:  # this start's server, with the repeats of the configuration's earlier starts
            servers[side] = replace(servers[side], url=launched.record.url, launch=recorded, name=launched.record.name)
        else:
            servers[side] = session.Server(launched.record.url, recorded, launched.record.name)
        failed_before = len(servers[side].failed)
        measured = session.measure(servers[side], workload, how, count, on_result)
        _say_ended(launched, measured, servers[side].failed[failed_before:])
    except BaseException as e:  # Ctrl-C, SIGTERM, a failed start: never a server left running
        stopped = launched.stop()
        if stopped:  # a Slurm job's says it was cancelled
            e.add_note(stopped if launched.record.job else
                       f"stopped the server's process group ({stopped}), log {launched.record.log}")
        raise
    launched.stop()
    return measured


def _say_ended(launched: Any, measured: list[BenchResult], failed: list[tuple[int, Exception]]) -> None:
    """A server whose process ended while it was measured (killed, crashed): the
    last repeat measured on it is not the server's number, and every repeat
    that measured nothing says why."""
    popen = getattr(launched, "popen", None)  # a server started here (not a Slurm job's, not a remote one)
    code = popen.poll() if popen is not None else None
    if code is None:
        return
    how = f"killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals() \
        else f"exit code {code}"
    hint = ", as the kernel's OOM killer does: look in dmesg" if code == -signal.SIGKILL else ""
    said = f"the server's process ended during the benchmark ({how}{hint}; its log: {launched.record.log})"
    if measured:
        measured[-1].health["problems"].append(said)
        measured[-1].health["valid"] = False
    for _, error in failed:
        error.add_note(said)


def _record(ledger: Ledger, servers: dict[str, session.Server], rounds: dict[str, list[int]] | None, order: str,
            relaunch: bool, cut_short: str | None = None) -> dict[str, session.Bench]:
    """Each configuration's repeats, aggregated and recorded (those that measured none left out);
    ``rounds``: interleaved, each repeat's round; ``cut_short``: why fewer were measured than asked
    ({} for how many were)."""
    group = uuid.uuid4().hex[:12]
    benches = {}
    for side, server in servers.items():
        if not server.results:
            continue
        metrics = session.aggregated(server, across_starts=rounds is not None or relaunch)
        if rounds is not None:
            metrics.update(repeats_across="interleaved server starts",
                           interleaved={"group": group, "side": side, "order": order, "rounds": rounds[side]})
        if cut_short:
            metrics["cut_short"] = cut_short.format(len(server.results))
        benches[side] = session.record(ledger, server, metrics)
    return dict(sorted(benches.items()))
