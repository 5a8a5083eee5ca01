"""A benchmark as firedup's commands make it: the server found from a URL, a
launched server's name or a ledger run; measured once or repeated; the
repeats aggregated; the result recorded in the ledger; recorded runs compared."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import __version__, registry
from .._exceptions import BenchFailed, HttpError, InputError, LedgerError
from ..ledger.store import Ledger
from . import metrics
from .compare import MIN_EFFECT_PCT, aggregate, compare, workload_differences
from .run import BenchResult, calibrate, served_model
from .run import run as run_once
from .workload import Workload


@dataclass(frozen=True)
class Measure:
    """How a server is measured, beside the workload (the options of ``firedup bench``)."""

    repeat: int = 1  # times the workload is sent: the spread is the noise
    model: str | None = None  # default: the launch's command line or configuration, else /v1/models
    percentiles: Sequence[float] = (99,)
    goodput: dict[str, float] | None = None  # SLOs in ms: ttft, tpot, e2el
    api_key: str | None = None  # sent as a bearer token, never recorded
    calibrate: bool = False  # against a zero-work server: the client's own ceiling

    def __post_init__(self) -> None:
        # refused here, before a server is started or a request sent, not once the numbers are computed
        if self.repeat < 1:
            raise InputError(f"repeat must be 1 or more, not {self.repeat}")
        for q in self.percentiles:
            metrics.checked_percentile(q)


@dataclass
class Bench:
    """A benchmark as recorded: the aggregated metrics, the last repeat's result, the ledger's run id
    (None: the ledger refused the write) and the run as it was written."""

    metrics: dict[str, Any]
    result: BenchResult
    run_id: int | None
    run: dict[str, Any]

    @property
    def valid(self) -> bool:
        """Whether every repeat is the server's number (the health of each, not of the last alone)."""
        return self.metrics.get("health", self.result.health)["valid"]


@dataclass
class Server:
    """The server a benchmark measures: its URL, the launch the ledger
    remembers of it, and the name it is recorded under."""

    url: str
    launch: dict[str, Any] | None = None
    name: str | None = None
    results: list[BenchResult] = field(default_factory=list)
    failed: list[tuple[int, Exception]] = field(default_factory=list)  # repeats that measured nothing: (number, why)


# What makes one repeat measure nothing while the others may measure: every request failed, or
# the server stopped answering (a connection refused, no answer, an HTTP error asking its model).
REPEAT_FAILED = (BenchFailed, HttpError, OSError)


def resolve(ledger: Ledger, target: str | None) -> Server:
    """A URL, a launched server's name or a ledger run id (its server's, or the URL a bench of one measured):
    the server to measure."""
    if target is None:
        raise InputError("bench needs the server's URL, a name from firedup ps, or a ledger run id")
    if "://" in target:  # a URL (one bench cannot measure, https:// or ftp://, is refused where it is read)
        return Server(target)
    name = target
    if target.isdigit():
        name = ledger.run(int(target))["name"]
        if "://" in name:  # a run of a bench of a bare URL: that URL
            return Server(name)
    record = registry.load(name)
    if not record.url:
        raise InputError(f"{name} has no known URL: pass it")
    if record.alive() is False:
        raise InputError(f"{name} is not running (it ended or was stopped: firedup ps --all); start it again first")
    launches = ledger.find(name=name, kind="launch", limit=1)
    return Server(record.url, launches[0] if launches else None, name)


def model_for(measure: Measure, launch: dict[str, Any] | None) -> tuple[str | None, str]:
    """--model, else the launch's recorded command line or configuration; else
    (None) the benchmark asks /v1/models."""
    if measure.model:
        return measure.model, "--model"
    found = served_model(launch.get("command") or [], launch.get("config") or {}) if launch else None
    return found or (None, "")


def measure(server: Server, workload: Workload, how: Measure, count: int,
            on_result: Callable[[metrics.RequestResult], None] | None = None) -> list[BenchResult]:
    """``count`` benchmarks of the server, one after the other (also kept on ``server.results``, each once
    measured); one that measured nothing is kept on ``server.failed``, and the others go on."""
    model, model_source = model_for(how, server.launch)
    workload = models_tokenizer(workload, model)
    before = len(server.results)
    for _ in range(count):
        kwargs: dict[str, Any] = {"model": model, "model_source": model_source, "percentiles": list(how.percentiles),
                                  "goodput": how.goodput, "api_key": how.api_key, "on_result": on_result}
        try:
            # each kept as soon as it is measured: an interrupted run still records it
            server.results.append(calibrate(workload, **kwargs) if how.calibrate
                                  else run_once(server.url, workload, **kwargs))
            _say_gone(server, how.repeat)
        except BrokenPipeError:
            raise  # the reader of firedup's output went away, not the server
        except REPEAT_FAILED as e:
            server.failed.append((len(server.results) + len(server.failed) + 1, e))
    return server.results[before:]


def models_tokenizer(workload: Workload, model: str | None) -> Workload:
    """With no --tokenizer, the model's own when the model is a folder here that holds its tokenizer.json
    (a server firedup launched from a local path): prompts of the lengths asked, not calibrated ones."""
    if workload.tokenizer or workload.dataset or not model or not (Path(model) / "tokenizer.json").is_file():
        return workload
    if importlib.util.find_spec("tokenizers") is None:
        return workload  # calibrated lengths then, as without the folder (the report says so)
    return replace(workload, tokenizer=model)


def _say_gone(server: Server, repeat: int) -> None:
    """A first note on a result whose server went away while it was measured: requests that found nothing
    listening where it had answered."""
    result = server.results[-1]
    gone = sum(1 for r in result.requests if not r["ok"] and "nothing is listening" in r["error"])
    if gone:
        during = f"repeat {len(server.results) + len(server.failed)}" if repeat > 1 else "the run"
        result.warnings.insert(0, f"the server went away during {during}: {gone} of {len(result.requests)} "
                                  f"requests found nothing listening at {result.url}")
        # what was measured is not the workload's number: its requests met no server
        result.health["problems"].append(f"the server went away: {gone} of {len(result.requests)} requests "
                                         "found nothing listening")
        result.health["valid"] = False


def health(results: Sequence[BenchResult]) -> dict[str, Any]:
    """The health of a run of repeats: valid when every repeat is; each problem
    named with its repeat where there were several."""
    if len(results) == 1:
        return results[0].health
    problems = [f"repeat {i}: {p}" for i, r in enumerate(results, 1) for p in r.health["problems"]]
    invalid = [i for i, r in enumerate(results, 1) if not r.valid]
    return {"valid": not invalid, "problems": problems, "invalid_repeats": invalid}


def aggregated(server: Server, across_starts: bool) -> dict[str, Any]:
    """One metrics dict from the server's repeats: means, with each repeat kept, what the noise
    covers, and the repeats that measured nothing (``failed_repeats``: their numbers and why)."""
    results = server.results
    out = aggregate([{**r.metrics, "client": f"firedup {__version__}", "model": r.model,
                      "model_source": r.model_source,
                      "health": r.health, "speculative": r.speculative} for r in results])
    out["health"] = health(results)
    if len(results) > 1:  # what the run-to-run noise covers
        out["repeats_across"] = "server starts" if across_starts else "one server start"
    if server.failed:
        out["failed_repeats"] = [{"repeat": n, "error": str(e)} for n, e in server.failed]
    return out


def lost(server: Server) -> Exception | None:
    """Why a server measured nothing at all (its first repeat's error), None if it measured."""
    return None if server.results or not server.failed else server.failed[0][1]


def record(ledger: Ledger, server: Server, metrics: dict[str, Any]) -> Bench:
    """The benchmark of ``server`` (its last result, the aggregated metrics) written to the ledger."""
    result = server.results[-1]
    base = server.launch or {}
    run = dict(kind="bench", name=server.name or result.url, host=base.get("host"),
               command=base.get("command", []), server=base.get("server"), version=base.get("version"),
               config=base.get("config", {}), environment=base.get("environment", {}),
               fingerprint=base.get("fingerprint"), outcome="ready" if metrics["health"]["valid"] else "incomplete",
               phases={}, workload=result.workload, metrics={**metrics, "requests": result.requests},
               elapsed=metrics["duration"], log=base.get("log"))
    try:
        run_id: int | None = ledger.record(**run)
    except LedgerError as e:
        # A ledger that refuses a write after it opened (a disk that filled) costs the record,
        # not the numbers measured: the caller still shows them, and says what was not recorded.
        ledger.unrecorded.append(f"{e}: the benchmark's numbers were not recorded")
        run_id = None
    return Bench(metrics, result, run_id, {**run, "id": run_id})


def bench(target: str | None, workload: Workload, how: Measure, *, ledger: Ledger,
          on_result: Callable[[metrics.RequestResult], None] | None = None) -> Bench:
    """``firedup bench``: measure the target (``how.repeat`` times, on one
    server start) and record it; with ``how.calibrate``, the client's own
    ceiling against a zero-work server."""
    if how.calibrate and target is not None:
        raise InputError("--calibrate measures the client against its own zero-work server: it takes no server "
                         f"({target})")
    server = Server("", name="calibrate") if how.calibrate else resolve(ledger, target)
    try:
        measure(server, workload, how, how.repeat, on_result)
    except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM: the repeats measured stay measured, as run keeps them
        if server.results:
            metrics = {**aggregated(server, across_starts=False),
                       "cut_short": f"interrupted after {len(server.results)} of {how.repeat} repeats"}
            say_recorded(e, {"A": record(ledger, server, metrics)}, {"A": server}, how.repeat, interleaved=False)
        elif how.repeat > 1:
            e.add_note("no repeat was finished, so nothing was recorded")
        raise
    error = lost(server)
    if error is not None:
        raise error
    return record(ledger, server, aggregated(server, across_starts=False))


def say_recorded(error: BaseException, benches: dict[str, Bench], servers: dict[str, Server], repeat: int,
                 interleaved: bool) -> None:
    """A note on the error that ends a measurement: the runs that hold what it had measured."""
    if benches:
        error.add_note("recorded what was measured: " + ", ".join(
            f"{'not recorded' if b.run_id is None else f'run {b.run_id}'} "
            f"({f'{side}: ' if interleaved else ''}{len(servers[side].results)} of {repeat} repeats)"
            for side, b in benches.items()))


def compare_runs(ledger: Ledger, numbers: Sequence[int], *, min_effect: float = MIN_EFFECT_PCT,
                 force: bool = False) -> dict[str, Any]:
    """``firedup compare``: recorded benchmark runs side by side (refused when
    their workloads differ, unless ``force``)."""
    twice = next((n for i, n in enumerate(numbers) if n in numbers[:i]), None)
    if twice is not None:
        raise InputError(f"run {twice} is named twice: compare sets different runs side by side")
    chosen = []
    for number in numbers:
        run = ledger.run(number)
        if run["kind"] != "bench":
            raise InputError(f"run {number} is not a benchmark run (see firedup runs)")
        chosen.append(run)
    if len(chosen) < 2:
        raise InputError("compare needs two runs or more")
    calibrations = [r["id"] for r in chosen if r["name"] == "calibrate" and not r.get("command")]
    if calibrations and len(calibrations) < len(chosen):
        raise InputError(f"run {calibrations[0]} is the client's calibration against a zero-work server, not a "
                         "server's benchmark: compare it only with other calibrations")
    for other in chosen[1:]:
        differences = workload_differences(chosen[0], other, Workload().describe())
        if differences and not force:
            listed = "; ".join(f"{k} {a} vs {b}" for k, a, b in differences)
            raise InputError(f"runs {chosen[0]['id']} and {other['id']} measured different workloads ({listed}): "
                             "their numbers are not comparable (--force to compare anyway)")
    return compare(chosen, min_effect)
