"""What is usual for a configuration, from the runs the ledger remembers:
expected phase durations (median, p95), anomalies, and what changed between
two runs (configuration, environment, phase durations)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import statistics
from collections.abc import Sequence
from typing import Any

from . import environment

# Flags that do not change how a server starts: where it listens, how it logs.
NEUTRAL_FLAGS = {"--port", "--host", "--hostname", "--log-level", "--uvicorn-log-level", "--api-key",
                 "--served-model-name", "--log-config-file", "--ssl-keyfile", "--ssl-certfile"}
HISTORY = 20  # how many past ready runs of a configuration make "usual"
# A phase is anomalous when it takes more than this many times its p95, and
# at least ANOMALY_MIN_SECONDS more than its median.
ANOMALY_FACTOR = 2.0
ANOMALY_MIN_SECONDS = 5.0
# The stall window of a phase is at least this many times its usual p95.
STALL_FACTOR = 1.5


def startup_args(argv: Sequence[str]) -> list[str]:
    """The command line less what does not affect start-up; interpreter paths by name only."""
    out, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        flag = arg.split("=", 1)[0]
        if flag in NEUTRAL_FLAGS:
            skip = "=" not in arg
            continue
        if i == 0 or re.search(r"/python[\d.]*$", arg):
            arg = os.path.basename(arg)
        out.append(arg)
    return out


def fingerprint(server: str | None, argv: Sequence[str], host: str | None) -> str:
    key = json.dumps([server, host or "local", startup_args(argv)])
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def expected(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per phase (and "total": time to ready) the median and p95 of past ready runs."""
    samples: dict[str, list[float]] = {}
    for run in runs[:HISTORY]:
        if run["outcome"] != "ready":
            continue
        for phase, seconds in run["phases"].items():
            if phase != "serving":
                samples.setdefault(phase, []).append(seconds)
        if run.get("elapsed") is not None:
            samples.setdefault("total", []).append(run["elapsed"])
    return {phase: {"median": statistics.median(v), "p95": _p95(v), "n": len(v)} for phase, v in samples.items()}


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def _p95(values: list[float]) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def stall_windows(usual: dict[str, dict[str, float]], default: float | None) -> dict[str, float]:
    """Per phase, a stall window no shorter than the phase usually lasts (with margin)."""
    return {phase: max(default or 0, STALL_FACTOR * e["p95"]) for phase, e in usual.items() if phase != "total"}


def anomalies(phases: dict[str, float], usual: dict[str, dict[str, float]]) -> list[str]:
    out = []
    for phase, seconds in phases.items():
        e = usual.get(phase)
        if e and seconds > ANOMALY_FACTOR * e["p95"] and seconds - e["median"] >= ANOMALY_MIN_SECONDS:
            out.append(f"{phase} {_seconds(seconds)}, usual {_seconds(e['median'])} for this configuration")
    return out


def _started(run: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The command a run started, less an ``env NAME=VALUE ...`` prefix, and its snapshot's variables
    with the prefix's (a run recorded before snapshots held them has them from its command line)."""
    command, env = environment.through_env(run["command"], (run.get("environment") or {}).get("env", {}))
    return command, environment.redact(env)


def diff(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """What differs from run a to run b: configuration, the workload of two
    benchmarks, packages, driver and GPUs, steering environment variables,
    phase durations."""
    out = []

    def compare(section: str, old: dict, new: dict) -> None:
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                out.append({"section": section, "key": key, "a": old.get(key), "b": new.get(key)})

    (command_a, env_a), (command_b, env_b) = _started(a), _started(b)
    # a run with no command line (a bench of a URL) has its args unset, not empty
    compare("command", {"args": " ".join(startup_args(command_a)) or None},
            {"args": " ".join(startup_args(command_b)) or None})
    compare("server", {"server": a["server"], "version": a["version"]},
            {"server": b["server"], "version": b["version"]})
    compare("config", a["config"], b["config"])
    if a.get("workload") and b.get("workload"):  # two benchmarks: what each asked of the server
        compare("workload", a["workload"], b["workload"])
    ea, eb = a.get("environment") or {}, b.get("environment") or {}
    if ea and eb:
        compare("packages", ea.get("packages", {}), eb.get("packages", {}))
        compare("gpu", {k: ea.get(k) for k in ("driver", "gpus")}, {k: eb.get(k) for k in ("driver", "gpus")})
        compare("env", env_a, env_b)
    elif ea or eb:  # a run without a snapshot (nothing started, or it could not be taken) says nothing of these
        out.append({"section": "environment", "key": "snapshot", "a": "taken" if ea else "missing",
                    "b": "taken" if eb else "missing"})
    for phase in sorted(set(a["phases"]) | set(b["phases"])):
        pa, pb = a["phases"].get(phase), b["phases"].get(phase)
        if pa is None or pb is None or abs(pa - pb) >= max(1.0, 0.2 * max(pa, pb)):
            out.append({"section": "phases", "key": phase, "a": pa, "b": pb})
    return out


# What changes how a server starts and how fast it serves, most telling first.
MATTERS = ("attention_backend", "attn_implementation", "attention", "dtype", "torch_dtype", "kv_cache_dtype",
           "quantization", "tp_size", "tensor_parallel_size", "pp_size", "pipeline_parallel_size", "dp_size",
           "mem_fraction_static", "gpu_memory_utilization", "max_model_len", "context_length", "enforce_eager",
           "disable_cuda_graph", "cuda_graph_max_bs", "sampling_backend", "model", "model_path")
_SECTIONS = ("server", "environment", "packages", "gpu", "config", "env", "command")
# Keys whose value belongs to one run only: where it listened, its seed, its pid.
_RUN_SPECIFIC = re.compile(r"(?:^|_)(?:port|ports|seed|pid|pids)$|^(?:host|hostname|nccl_port)$", re.I)
SHOWN = 10


def _run_specific(change: dict[str, Any]) -> bool:
    return bool(_RUN_SPECIFIC.search(str(change["key"]))) or any(
        isinstance(v, str) and "/tmp/" in v for v in (change["a"], change["b"]))


def _rank(change: dict[str, Any]) -> tuple[int, int, str]:
    key = str(change["key"])
    matters = MATTERS.index(key) if change["section"] == "config" and key in MATTERS else len(MATTERS)
    section = _SECTIONS.index(change["section"]) if change["section"] in _SECTIONS else len(_SECTIONS)
    if change["section"] == "config" and matters == len(MATTERS):
        section = len(_SECTIONS)  # the rest of the configuration after everything else
    return section, matters, key


def notable(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The changes worth showing after a slow or failed start, like with like:
    keys known in both runs first, those that matter on top; keys one run
    printed and the other did not (a server that printed 3 settings against
    one that printed 200) summarised; ports, seeds, pids and /tmp paths left
    out; phase durations are the anomalies' business."""
    kept = [c for c in changes if c["section"] != "phases" and not _run_specific(c)
            # a version the server had not printed yet (a start that timed out early) did not change
            and not (c["section"] == "server" and (c["a"] is None or c["b"] is None))]
    # A setting the server did not print is unknown; a package or variable
    # absent from a snapshot is known to be absent.
    unknown = [c for c in kept if c["section"] == "config" and (c["a"] is None or c["b"] is None)]
    both = sorted((c for c in kept if c not in unknown), key=_rank)
    if not unknown:
        return both
    return both + [{"section": "config", "key": None,
                    "only_a": [str(c["key"]) for c in unknown if c["b"] is None],
                    "only_b": [str(c["key"]) for c in unknown if c["a"] is None]}]


def shown(value: Any) -> str:
    """A changed value for a person: "unset" where a run did not have it."""
    return "unset" if value is None else str(value)


def change_lines(changes: list[dict[str, Any]], limit: int = SHOWN) -> list[str]:
    """At most ``limit`` lines for a person: the notable changes, then how many more."""
    lines = []
    for c in changes:
        if c["key"] is None:
            for side, which in (("only_a", "the last good run"), ("only_b", "this run")):
                keys = c[side]
                if keys:
                    more = f", +{len(keys) - 3} more" if len(keys) > 3 else ""
                    lines.append(f"{c['section']}: {len(keys)} key(s) only {which} printed "
                                 f"({', '.join(keys[:3])}{more})")
        else:
            lines.append(f"{c['key']} {shown(c['a'])} → {shown(c['b'])}")
    if len(lines) > limit:
        lines = lines[:limit - 1] + [f"… and {len(lines) - limit + 1} more (firedup diff shows all)"]
    return lines
