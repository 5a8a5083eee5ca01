"""Command line: arguments in (``_cli_args``), one library call per command,
its answer shown (a view for people, or ``--json``), the exit code out."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from . import _cli_args as options
from . import _servers, _targets
from ._diagnose import diagnose, diagnose_stream
from ._exceptions import BenchFailed, FiredupError, InputError, ServerError
from ._launch import Launched, attach
from ._run import run as run_loop
from .bench import plot, session
from .bench.metrics import RequestResult
from .judge import Verdict
from .ledger import history
from .ledger.store import Ledger, damage
from .sinks import Sink, summary, view
from .sinks.events import JsonEvents
from .sinks.live import LiveView, PlainView

BENCH_FAILED = 1  # a benchmark with no measurement to trust, as one whose client was the bottleneck
USAGE_ERROR = 2  # a FiredupError: bad arguments, an unreadable log, an unreachable host
PIPE_CLOSED = 141  # the reader of the output went away, as the shell reports a process SIGPIPE ended


def _sinks(args: argparse.Namespace, console: Console, title: str) -> list[Sink]:
    if args.json:
        return [JsonEvents()]
    if console.is_terminal:
        return [LiveView(console, title)]
    return [PlainView(console)]


def _finish(sinks: Sequence[Sink], verdict: Verdict, note: str | None = None) -> int:
    for sink in sinks:
        sink.verdict(verdict, note)
    return verdict.code


def _print_json(value: object) -> None:
    print(json.dumps(value, default=str, ensure_ascii=False))


# Piped or redirected (grep, a file, a CI log), output is not cut to fit 80
# columns: an evidence line or a path folded mid-word breaks grep and copy-paste.
PIPED_WIDTH = 100_000


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich would exit 1 here; the reader going away is handled once, in run()
        self.quiet = True
        raise BrokenPipeError


def _console() -> Console:
    # Paths, names and log lines are printed as they are, never read as rich
    # markup ("[/tmp/a.log: ready]" closes no tag) or emoji codes (":bug:").
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return _Console(highlight=False, markup=False, emoji=False)
    return _Console(highlight=False, markup=False, emoji=False, width=PIPED_WIDTH)


def _say_unrecorded(ledger: Ledger) -> None:
    """A run the ledger refused after it opened (a disk that filled): one line each (the starts of
    a repeated run refused alike, one line), after the verdict or the numbers."""
    for error in dict.fromkeys(ledger.unrecorded):
        print(f"firedup: {error}", file=sys.stderr)


def cmd_diagnose(args: argparse.Namespace) -> int:
    ledger = Ledger(args.ledger) if args.record else None
    verdict = diagnose(args.file, server=args.server, ledger=ledger)
    if args.json:
        _print_json(verdict.to_dict())
    else:
        summary.render(verdict, _console(), source="" if args.file == "-" else args.file)
    if ledger is not None:
        _say_unrecorded(ledger)
    return verdict.code


def cmd_watch(args: argparse.Namespace) -> int:
    console, ledger = _console(), Ledger(args.ledger)
    if len(args.targets) == 1:
        sinks = _sinks(args, console, f"watch {args.targets[0]}")
        code = _finish(sinks, _targets.watch(args.targets[0], options.follow(args), sinks=sinks, ledger=ledger))
        _say_unrecorded(ledger)
        return code
    base: Sink = JsonEvents() if args.json else PlainView(console)
    overall = _targets.watch_all(args.targets, options.follow(args), base, every=args.all, ledger=ledger)
    worst_target, worst = overall.worst
    if args.json:
        _print_json({"event": "overall", "outcome": worst.outcome, "target": worst_target,
                     "targets": {t: v.outcome for t, v in overall.decided.items()}})
    else:
        names = ", ".join(f"{t}: {v.outcome}" for t, v in overall.decided.items())
        cancelled = [t for t, v in overall.verdicts.items() if v is None]
        tail = f" (stopped watching {', '.join(cancelled)})" if cancelled else ""
        blame = "" if worst.outcome == "ready" else f" because of {worst_target}"
        console.print(f"overall: {worst.outcome}{blame}  [{names}]{tail}")
    _say_unrecorded(ledger)
    return worst.code


def cmd_launch(args: argparse.Namespace) -> int:
    cmd = options.server_command(args)
    if args.attach and (args.host or args.slurm):
        raise InputError("--attach streams a server started on this machine, not with --host or --slurm "
                         "(follow it with firedup watch)")
    console = _console()
    sinks = _sinks(args, console, f"launch {os.path.basename(cmd[0])}")
    ledger = Ledger(args.ledger)
    launched = _servers.launch(cmd, options.start(args), sinks=sinks, ledger=ledger)
    ready = launched.verdict.outcome == "ready"
    attached = launched if args.attach and ready and isinstance(launched, Launched) and launched.popen else None
    note = launched.note
    if attached is not None:  # its log follows here and Ctrl-C stops it: no tail -f or firedup stop to run
        note = f"running: pid {attached.record.pid}, log {attached.record.log}; its output follows, Ctrl-C stops it"
    code = _finish(sinks, launched.verdict, note)
    _say_unrecorded(ledger)
    if attached is not None:
        # with --json, standard output carries only JSON lines: the server's output goes to standard error
        code, stopped = attach(attached, sys.stderr.buffer if args.json else sys.stdout.buffer)
        if stopped:
            print(f"stopping {attached.record.name}: {stopped}", file=sys.stderr if args.json else sys.stdout)
        elif (ended := _ended(attached, launched.verdict)) is not None:
            code = _finish(sinks, ended, f"it had been ready: it failed while serving, attached, and exited "
                                         f"({ended.exit_code})")
    return code


def _ended(attached: Launched, ready: Verdict) -> Verdict | None:
    """A server that exited by itself while attached, failed: its log read whole
    as diagnose reads it (a crash while serving; vLLM exits 0 after its engine
    died). None for one that ended cleanly."""
    assert attached.popen is not None
    with open(attached.record.log, "rb") as log:
        verdict = diagnose_stream(log, server=ready.server)
    if verdict.outcome != "failed":
        return None
    return replace(verdict, exit_code=attached.popen.returncode)


def cmd_stop(args: argparse.Namespace) -> int:
    print(_servers.stop(args.name, args.grace, args.ssh_arg))
    return 0


def cmd_ps(args: argparse.Namespace) -> int:
    everything = _servers.listing()
    # those running, or not known to have ended (a remote one firedup did not stop, a job squeue cannot tell of)
    rows = everything if args.all else [r for r in everything if r["alive"] is not False]
    if args.json:
        print(json.dumps(rows))
        return 0
    for r in rows:
        if "job" in r:
            state, where = f"{r['job_state'].lower():<7}", f"job {r['job']:<8}"
        else:
            state = {True: "running", False: "stopped" if r["stopped"] else "exited ", None: "remote "}[r["alive"]]
            where = f"pid {r['pid']:<8}"
        print(f"{r['name']:<32} {state} {where} {r['server'] or '-':<12} {r['url'] or '-':<24} {r['cmd']}")
    if len(rows) < len(everything):
        print(f"({len(everything) - len(rows)} ended not shown: firedup ps --all)")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    ledger = Ledger(args.ledger, read_only=True)
    found = ledger.find(name=args.name, server=args.server, since=args.since, limit=args.limit, damaged=True)
    if args.json:
        print(json.dumps(found, default=str))
    else:
        view.runs_table(found, _console())
    for run in found:  # listed with what could be read; its row is never rewritten
        if "damaged" in run:
            print(f"firedup: run {run['id']} is damaged in the ledger: {damage(run)}; left as it is", file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    run = Ledger(args.ledger, read_only=True).run(args.run)
    if args.json:
        print(json.dumps(run, default=str))
    else:
        view.show(run, _console())
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    if args.a == args.b:
        raise InputError(f"run {args.a} is named twice: diff says what changed between two runs")
    ledger = Ledger(args.ledger, read_only=True)
    changes = history.diff(ledger.run(args.a), ledger.run(args.b))
    if args.json:
        print(json.dumps({"a": args.a, "b": args.b, "changes": changes}, default=str))
    else:
        view.diff(args.a, args.b, changes, _console())
    return 0


@contextmanager
def _progress(console: Console, shown: bool, total: int | None) -> Iterator[Callable[[RequestResult], None]]:
    """A transient bar of the requests answered, on a terminal."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not shown) as progress:
        task = progress.add_task("requests", total=total or None)
        yield lambda result: progress.advance(task)


def _show_bench(args: argparse.Namespace, console: Console, bench: session.Bench) -> int:
    result, metrics, run_id = bench.result, bench.metrics, bench.run_id
    if args.plot:
        recorded = f"run {run_id}: " if run_id is not None else ""
        plot.bench(result.requests, args.plot, f"{recorded}{result.model} at {result.url}")
    if args.json:
        print(json.dumps({**result.to_dict(), **{k: v for k, v in metrics.items() if k != "requests"},
                          "run_id": run_id}, default=str))
    else:
        view.bench_report({**metrics, "speculative": result.speculative,
                           "warnings": result.warnings + _failed_repeats(metrics)}, console)
        if run_id is not None:  # else the line on stderr says it was not recorded
            console.print(Text(f"recorded as run {run_id} (firedup show {run_id}; firedup compare {run_id} OTHER)",
                               "dim"))
    return 0 if bench.valid else 1


def _failed_repeats(metrics: dict[str, Any]) -> list[str]:
    return [f"repeat {f['repeat']} measured nothing and is left out: {f['error']}"
            for f in metrics.get("failed_repeats", ())]


def cmd_bench(args: argparse.Namespace) -> int:
    console, workload, ledger = _console(), options.workload(args), Ledger(args.ledger)
    try:
        with _progress(console, console.is_terminal and not args.json,
                       (workload.num_prompts or 0) * args.repeat) as tick:
            bench = session.bench(args.target, workload, options.measure(args), ledger=ledger, on_result=tick)
        return _show_bench(args, console, bench)
    finally:
        _say_unrecorded(ledger)


def cmd_run(args: argparse.Namespace) -> int:
    ledger = Ledger(args.ledger)
    try:
        return _run(args, ledger)
    finally:
        _say_unrecorded(ledger)


def _run(args: argparse.Namespace, ledger: Ledger) -> int:
    cmd, vs = options.commands(args)
    console, workload = _console(), options.workload(args)
    sinks: list[Sink] = [PlainView(console)] if not args.json else []
    total = (workload.num_prompts or 0) * args.repeat * (2 if vs else 1)
    try:
        with _progress(console, console.is_terminal and not args.json, total) as tick:
            ran = run_loop(cmd, vs=vs, workload=workload, repeat=args.repeat, relaunch=args.relaunch,
                           model=args.model, api_key=args.api_key, percentiles=args.percentiles,
                           goodput=options.goodput(args.goodput), name=args.name, server=args.server, url=args.url,
                           stall=args.stall, timeout=args.timeout, port_check=args.port_check == "on",
                           slurm=options.slurm_job(args), min_effect=args.min_effect, ledger=ledger,
                           sinks=sinks, on_result=tick)
    except ServerError as e:  # the start's verdict, as launch shows it
        code = _finish(sinks or [JsonEvents()], e.verdict, e.note)
        for note in getattr(e, "__notes__", ()):  # a later start's: what was measured before it, recorded
            print(f"firedup: {note}", file=sys.stderr)
        return code
    if ran.comparison is None:
        return _show_bench(args, console, ran.benches["A"])
    ids = {side: bench.run_id for side, bench in ran.benches.items()}
    # exit 1 says some repeat was not the server's number: say which, and why
    problems = [f"{side}'s {p}" if len(bench.metrics.get("repeats", ())) > 1 else f"{side}: {p}"
                for side, bench in ran.benches.items() for p in bench.metrics["health"]["problems"]]
    failed = {side: bench.metrics["failed_repeats"] for side, bench in ran.benches.items()
              if "failed_repeats" in bench.metrics}
    if args.json:
        print(json.dumps({"runs": ids, "order": ran.order, "compare": ran.comparison, "valid": ran.valid,
                          "problems": problems, **({"failed_repeats": failed} if failed else {})}, default=str))
    else:
        view.compare_table(ran.comparison, console)
        started = f"started {' '.join(ran.order)}"
        console.print(Text(f"recorded as runs {ids['A']} (A) and {ids['B']} (B), {started} "
                           f"(firedup compare {ids['A']} {ids['B']})" if None not in ids.values()
                           else f"{started}; not recorded", "dim"))
        for side, bench in ran.benches.items():
            for line in _failed_repeats(bench.metrics):
                console.print(Text(f"note: {side}'s {line}", "yellow"))
        if not ran.valid:
            console.print(Text("not the servers' numbers (" + "; ".join(problems) + ")", "bold red"))
    return 0 if ran.valid else 1


def cmd_compare(args: argparse.Namespace) -> int:
    ledger = Ledger(args.ledger, read_only=True)
    report = session.compare_runs(ledger, args.runs, min_effect=args.min_effect, force=args.force)
    if args.plot:
        plot.comparison(report, args.plot)
    if args.json:
        print(json.dumps(report, default=str))
    else:
        view.compare_table(report, _console())
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "diagnose": cmd_diagnose, "watch": cmd_watch, "launch": cmd_launch, "stop": cmd_stop, "ps": cmd_ps,
    "bench": cmd_bench, "run": cmd_run, "compare": cmd_compare, "runs": cmd_runs, "show": cmd_show, "diff": cmd_diff,
}


def main(argv: list[str] | None = None) -> int:
    args = options.parser().parse_command_line(argv)
    try:
        return COMMANDS[args.command](args)
    except BrokenPipeError:
        raise  # not the user's input: the reader of our output went away
    except BenchFailed as e:  # requests sent and none answered: a failed benchmark, not bad usage
        _say_error(e)
        return BENCH_FAILED
    except (FiredupError, OSError) as e:  # OSError: the system's answer (a file, a socket, a permission)
        _say_error(e)
        return USAGE_ERROR


def _say_error(e: Exception) -> None:
    """One line, with what was done on the way out (a server stopped, what was measured recorded)."""
    print("firedup: " + "; ".join([str(e), *getattr(e, "__notes__", [])]), file=sys.stderr)


class Terminated(KeyboardInterrupt):
    """SIGTERM (timeout(1), a cancelled CI job, systemd): stopped as Ctrl-C stops it,
    so a server being started is not left running."""


def _terminated(signum: int, frame: object) -> None:
    raise Terminated


def run() -> None:
    signal.signal(signal.SIGTERM, _terminated)
    try:
        sys.exit(main())
    except KeyboardInterrupt as e:
        # what was stopped on the way out (a server's process group), as its notes say
        print("firedup: " + "; ".join(["interrupted", *getattr(e, "__notes__", [])]), file=sys.stderr)
        sys.exit(143 if isinstance(e, Terminated) else 130)
    except BrokenPipeError as e:
        # The reader went away (a pipe into head): the output still buffered
        # must not fail again as the interpreter exits. Only what was stopped
        # on the way out (a server being launched) is worth saying.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if getattr(e, "__notes__", None):
            print("firedup: " + "; ".join(["output closed by its reader", *e.__notes__]), file=sys.stderr)
        sys.exit(PIPE_CLOSED)
