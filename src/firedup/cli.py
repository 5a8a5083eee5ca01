"""Command line: arguments in, API calls out."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
import uuid
from datetime import datetime
from urllib.parse import urlsplit

from rich.console import Console

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from . import __version__, registry, rules, slurm
from .bench.compare import MIN_EFFECT_PCT, aggregate, compare, workload_differences
from .bench.run import BenchResult, calibrate, served_model
from .bench.run import run as bench_run
from .bench import plot
from .bench.workload import Workload
from ._diagnose import diagnose
from ._exceptions import FiredupError, InputError
from .judge import Verdict
from .ledger import history
from .ledger.memory import Memory
from ._launch import start_and_watch, start_remote, stop_remote
from .ledger.store import Ledger
from .rules import FAMILIES
from .sinks import Labelled, Sink, summary, view
from .sinks.events import JsonEvents
from .sinks.live import LiveView, PlainView
from .sources import process, ssh
from .sources.file import FileFollower
from .defaults import GRACE, QUIET, STALL, STOP_GRACE
from .watch import Watch

USAGE_ERROR = 2
SERVERS = (*FAMILIES, "generic")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value


def _live_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", choices=SERVERS, help="server family (default: detect)")
    p.add_argument("--url", help="the server's base URL for health probes (default: from --host/--port)")
    p.add_argument("--stall", type=_seconds, default=STALL,
                   help=f"seconds without progress evidence before 'stalled' (default {STALL:g})")
    p.add_argument("--timeout", type=_seconds, help="hard cap in seconds (default: none while it progresses)")
    p.add_argument("--grace", type=_seconds, default=GRACE,
                   help=f"seconds a traceback gets for the process to exit or go on (default {GRACE:g})")
    p.add_argument("--probe-generate", action="store_true",
                   help="ready only once a one-token completion succeeds (needs the URL)")
    p.add_argument("--json", action="store_true", help="JSON events, one a line; the verdict last")


def _port_check_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port-check", choices=("on", "off"), default="on",
                   help="on (default): a port someone already listens on fails the start at once, naming them")


def _bench_options(p: argparse.ArgumentParser) -> None:
    load = p.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=int, help="requests in flight at once (default 1)")
    load.add_argument("--request-rate", type=float, help="requests per second (Poisson arrivals)")
    p.add_argument("--burstiness", type=float, default=1.0, help="gamma shape of arrivals (1: Poisson)")
    p.add_argument("--max-concurrency", type=int, help="with --request-rate: a cap on requests in flight")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--num-prompts", type=int, help="how many requests (default 100)")
    size.add_argument("--duration", type=_seconds, help="send requests for this many seconds")
    p.add_argument("--input-len", type=int, default=256, help="tokens of a random prompt (default 256)")
    p.add_argument("--random-range-ratio", type=float, default=0.0, metavar="R",
                   help="lengths uniform in [L·(1-R), L·(1+R)], as vllm bench serve (default 0)")
    p.add_argument("--tokenizer", metavar="PATH|MODEL_DIR",
                   help="build prompts from this tokenizer's token ids, as vllm bench serve (needs firedup[tokenizer]; "
                        "default: the server's tokenize endpoint, else words calibrated on its usage)")
    p.add_argument("--output-len", type=int, default=128, help="max tokens of an answer (default 128)")
    p.add_argument("--dataset", help="JSONL prompts ({\"prompt\": ..., \"output_len\": ...}) or a ShareGPT file")
    p.add_argument("--warmup", type=int, default=2, help="requests sent first and not counted")
    p.add_argument("--chat", action="store_true", help="use /v1/chat/completions")
    p.add_argument("--model", help="the served model's name (default: from the launch's command line or "
                                   "configuration, else the first of /v1/models)")
    p.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"),
                   help="sent as a bearer token (default: OPENAI_API_KEY); never recorded")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--ignore-eos", action="store_true", help="ask the server to generate all --output-len tokens")
    p.add_argument("--goodput", nargs="+", metavar="SLO:MS", help="e.g. ttft:500 tpot:50 (e2el too)")
    p.add_argument("--percentiles", default="99", help="comma-separated, e.g. 50,90,99")
    p.add_argument("--repeat", type=int, default=1, help="run K times to tell a change from noise")
    p.add_argument("--calibrate", action="store_true", help="measure the client's own ceiling on a zero-work server")
    p.add_argument("--plot", metavar="FILE.png", help="throughput and latency over time (needs matplotlib)")
    p.add_argument("--json", action="store_true")


def _min_effect_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-effect", type=float, default=MIN_EFFECT_PCT, metavar="PCT",
                   help=f"the smallest change worth calling a regression or an improvement, in %% "
                        f"(default {MIN_EFFECT_PCT:g})")


def _ledger_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ledger", metavar="PATH", help="the run ledger (default: FIREDUP_LEDGER, or "
                                                      "~/.local/share/firedup/ledger.db)")


def _since(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", text)
    if m:
        return time.time() - float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date or an age: {text!r}") from None


def _slurm_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--slurm", action="store_true", help="submit CMD as a Slurm job (sbatch) and follow it")
    p.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG",
                   help="with --slurm: an extra sbatch argument (repeatable), e.g. --sbatch-arg=--time=10")
    p.add_argument("--nodes", type=int, default=1, help="with --slurm: nodes, one task (and log) each (default 1)")
    p.add_argument("--log-dir", help="with --slurm: the folder of the job's logs, seen by every node "
                                     "(default ~/.local/state/firedup/logs)")


def _ssh_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ssh-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for ssh (repeatable; also FIREDUP_SSH_ARGS, e.g. '-F /path/config')")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="firedup", description="Start, watch and diagnose LLM inference servers.")
    parser.add_argument("--version", action="version", version=f"firedup {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    d = sub.add_parser("diagnose", help="say what happened in a server log",
                       description="Read a server log and say what happened: ready, failed (with cause and remedy) "
                                   "or incomplete. Exit code: 0 ready, 1 failed, 2 bad input, 5 incomplete.")
    d.add_argument("file", help="the log file, or - for standard input")
    d.add_argument("--server", choices=SERVERS, help="server family (default: detect from the log)")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.add_argument("--record", action="store_true", help="also write the run to the ledger")
    _ledger_option(d)

    w = sub.add_parser("watch", help="follow a server's log live until it is ready, failed or stalled",
                       description="Follow a log (tail -F: waits for it, follows rotation) or - (standard input) "
                                   "to a verdict. Exit code: 0 ready, 1 failed, 2 bad input, 3 stalled, 4 timeout.")
    w.add_argument("targets", nargs="+", metavar="target",
                   help="log file, ssh://[user@]host[:port]/abs/path, slurm://[[user@]host/]JOBID (through that login "
                        "node), or - for standard input; "
                        "several at once")
    w.add_argument("--pid", type=int, help="also watch this process (local or on the remote host of the target)")
    w.add_argument("--all", action="store_true",
                   help="one multi-node server: ready when every target is, failed as soon as one fails")
    w.add_argument("--quiet", type=_seconds, default=QUIET,
                   help="with no process known (no --pid, no writer found): seconds of silence after a fatal "
                        f"exception that make it failed (default {QUIET:g})")
    _live_options(w)
    _ssh_options(w)
    _ledger_option(w)

    la = sub.add_parser("launch", help="start a server and follow it to a verdict",
                        description="Start CMD detached (own session, output to a log file), follow it live, "
                                    "and exit with the verdict. Ready: it keeps running. Failed, timeout or "
                                    "Ctrl-C: its process group is stopped. Stalled: left running unless "
                                    "--kill-on-stall.")
    la.add_argument("--name", help="a name for firedup stop / ps (default: family and time)")
    la.add_argument("--log", help="log file (default: under ~/.local/state/firedup/logs)")
    la.add_argument("--attach", action="store_true", help="after ready, stay and stream the log; Ctrl-C stops it")
    la.add_argument("--kill-on-stall", action="store_true", help="stop a stalled server too")
    la.add_argument("--host", help="[user@]host[:port]: start it there over SSH (it survives the connection); "
                                   "with --slurm, the login node that submits and follows the job")
    _port_check_option(la)
    _slurm_options(la)
    _live_options(la)
    _ssh_options(la)
    _ledger_option(la)
    la.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the server's command line")

    st = sub.add_parser("stop", help="stop a server started by firedup launch (SIGTERM, then SIGKILL)")
    st.add_argument("name")
    st.add_argument("--grace", type=_seconds, default=STOP_GRACE, help="seconds between SIGTERM and SIGKILL")
    _ssh_options(st)

    ps = sub.add_parser("ps", help="list servers started by firedup launch")
    ps.add_argument("--json", action="store_true")

    b = sub.add_parser("bench", help="measure a ready server (OpenAI-compatible API, streaming)",
                       description="Measure TTFT, TPOT, ITL, E2EL and throughput with the definitions of "
                                   "`vllm bench serve`, and record the run in the ledger.")
    b.add_argument("target", nargs="?", help="the server's URL, a name from firedup ps, or a ledger run id")
    _bench_options(b)
    _ledger_option(b)

    rn = sub.add_parser("run", help="launch, wait until ready, benchmark, record, stop: the whole loop")
    rn.add_argument("--name", help="a name for the server")
    rn.add_argument("--server", choices=SERVERS)
    rn.add_argument("--url", help="the server's base URL (default: from --host/--port)")
    rn.add_argument("--stall", type=_seconds, default=STALL)
    rn.add_argument("--timeout", type=_seconds)
    _port_check_option(rn)
    _slurm_options(rn)
    rn.add_argument("--relaunch", action="store_true",
                    help="start the server afresh for each --repeat: the noise then includes start-to-start variation")
    _min_effect_option(rn)
    _bench_options(rn)
    _ledger_option(rn)
    rn.add_argument("cmd", nargs=argparse.REMAINDER,
                    help="-- then the server's command line; -- CMD_A --vs CMD_B: two configurations, their "
                         "--repeat starts interleaved (A B B A ...), compared pair by pair")

    cp = sub.add_parser("compare", help="benchmark runs side by side: deltas, noise, what changed")
    cp.add_argument("runs", type=int, nargs="+", metavar="RUN")
    cp.add_argument("--force", action="store_true", help="compare even when the workloads differ")
    _min_effect_option(cp)
    cp.add_argument("--plot", metavar="FILE.png", help="the key metrics side by side (needs matplotlib)")
    cp.add_argument("--json", action="store_true")
    _ledger_option(cp)

    rs = sub.add_parser("runs", help="list the runs the ledger remembers, newest first")
    rs.add_argument("--name")
    rs.add_argument("--server", choices=SERVERS)
    rs.add_argument("--since", type=_since, help="a date (2026-11-29) or an age (90m, 12h, 7d)")
    rs.add_argument("--limit", type=int, default=20)
    rs.add_argument("--json", action="store_true")
    _ledger_option(rs)

    sh = sub.add_parser("show", help="one run of the ledger: verdict, configuration, phases as bars")
    sh.add_argument("run", type=int)
    sh.add_argument("--json", action="store_true")
    _ledger_option(sh)

    df = sub.add_parser("diff", help="what changed between two runs: configuration, environment, phase durations")
    df.add_argument("a", type=int)
    df.add_argument("b", type=int)
    df.add_argument("--json", action="store_true")
    _ledger_option(df)
    return parser


def _sinks(args: argparse.Namespace, console: Console, title: str) -> list:
    if args.json:
        return [JsonEvents()]
    if console.is_terminal:
        return [LiveView(console, title)]
    return [PlainView(console)]


def _finish(sinks: list, verdict, note: str | None = None) -> int:
    for sink in sinks:
        sink.verdict(verdict, note)
    return verdict.code


def cmd_diagnose(args: argparse.Namespace) -> int:
    ledger = Ledger(args.ledger) if args.record else None
    verdict = diagnose(args.file, server=args.server)
    if ledger is not None:
        memory = Memory(ledger, verdict.server, [], None)
        verdict = memory.remember(verdict, kind="diagnose", name=None, environment=None,
                        log=None if args.file == "-" else os.path.abspath(args.file))
    if args.json:
        print(json.dumps(verdict.to_dict(), ensure_ascii=False))
    else:
        summary.render(verdict, Console(highlight=False), source="" if args.file == "-" else args.file)
    return verdict.code


def _watch_for(target: str, args: argparse.Namespace, sinks: list, cancel=None) -> Watch:
    remote = ssh.parse_target(target)
    if remote is not None:
        host, path = remote
        url = args.url
        if url and urlsplit(url).path in ("", "/"):
            pack = rules.load().packs.get(args.server) if args.server else None
            url = url.rstrip("/") + (pack.health if pack and pack.health else "/health")
        source = ssh.RemoteSource(host, path, pid=args.pid, url=url, ssh_args=args.ssh_arg)
        return Watch(remote=source, server=args.server, stall=args.stall, timeout=args.timeout,
                     grace=args.grace, sinks=sinks, cancel=cancel, quiet=args.quiet)
    if args.pid is not None and not process.pid_exists(args.pid):
        raise InputError(f"no process {args.pid}")
    if target != "-" and os.path.isdir(target):
        raise InputError(f"cannot watch {target}: is a directory")
    return Watch(log=None if target == "-" else target, stream=sys.stdin.buffer if target == "-" else None,
                 server=args.server, pid=args.pid, url=args.url, stall=args.stall, timeout=args.timeout,
                 grace=args.grace, sinks=sinks, probe_generate=args.probe_generate, cancel=cancel,
                 quiet=args.quiet)


def cmd_watch(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    if len(args.targets) > 1:
        if any(t.startswith("slurm://") for t in args.targets):
            raise InputError("slurm://JOBID goes alone: firedup follows every log of a job itself")
        return _watch_many(args, console)
    target = args.targets[0]
    ledger = Ledger(args.ledger)
    sinks = _sinks(args, console, f"watch {target}")
    job = slurm.target(target)
    if job is not None:
        host, job = job
        commands = slurm.commands_for(host, args.ssh_arg)
        try:
            verdict = slurm.watch(job, server=args.server, url=args.url, stall=args.stall, timeout=args.timeout,
                                  grace=args.grace, sinks=sinks, commands=commands)
        finally:
            commands.close()
            for sink in sinks:
                sink.close()
        memory = Memory(ledger, verdict.server, [], host)
        verdict = memory.remember(verdict, kind="watch", name=target, log=verdict.slurm["logs"]["job"],
                                  environment=None, scheduler=verdict.slurm)
        return _finish(sinks, verdict)
    watch = _watch_for(target, args, sinks)
    try:
        verdict = watch.run()
    finally:
        for sink in sinks:
            sink.close()
        if watch.remote is not None:
            watch.remote.close()
    return _finish(sinks, _remember_watch(ledger, target, verdict))


def _remember_watch(ledger: Ledger, target: str, verdict: Verdict) -> Verdict:
    remote = ssh.parse_target(target)
    host = str(remote[0]) if remote else None
    log = target if remote or target == "-" else os.path.abspath(target)
    # A watched log has no command line: runs of the same log are one configuration.
    memory = Memory(ledger, verdict.server, [], host, identity=["watch", log])
    return memory.remember(verdict, kind="watch", name=target, environment=None, log=log)


def _watch_many(args: argparse.Namespace, console: Console) -> int:
    """Several targets at once, one thread each: a verdict per target, then the overall one."""
    if args.pid is not None or "-" in args.targets:
        raise InputError("--pid and - (standard input) go with a single target")
    ledger = Ledger(args.ledger)
    cancel = threading.Event()
    base = JsonEvents() if args.json else PlainView(console)
    watches = {t: _watch_for(t, args, [Labelled(base, t)], cancel) for t in args.targets}
    verdicts: dict[str, Verdict | None] = {}
    errors: dict[str, str] = {}

    def run(target: str, watch: Watch) -> None:
        try:
            verdicts[target] = watch.run()
        except FiredupError as e:
            errors[target] = str(e)
            verdicts[target] = None
            cancel.set()
        finally:
            if watch.remote is not None:
                watch.remote.close()
        if args.all and verdicts[target] is not None and verdicts[target].outcome != "ready":
            cancel.set()  # one node failing fails the server

    threads = [threading.Thread(target=run, args=item, daemon=True) for item in watches.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise InputError("; ".join(f"{t}: {e}" for t, e in errors.items()))
    done = {t: v for t, v in verdicts.items() if v is not None}
    done = {target: _remember_watch(ledger, target, verdict) for target, verdict in done.items()}
    for target, verdict in done.items():
        Labelled(base, target).verdict(verdict)
    worst_target, worst = max(done.items(), key=lambda item: item[1].outcome.severity)
    overall = worst.outcome
    if args.json:
        print(json.dumps({"event": "overall", "outcome": overall, "target": worst_target,
                          "targets": {t: v.outcome for t, v in verdicts.items() if v}}))
    else:
        names = ", ".join(f"{t}: {v.outcome}" for t, v in done.items())
        cancelled = [t for t, v in verdicts.items() if v is None]
        tail = f" (stopped watching {', '.join(cancelled)})" if cancelled else ""
        blame = "" if overall == "ready" else f" because of {worst_target}"
        console.print(f"overall: {overall}{blame}  [{names}]{tail}")
    return worst.code


def _server_command(args: argparse.Namespace) -> list[str]:
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise InputError(f"{args.command} needs a command: firedup {args.command} [options] -- CMD ...")
    return cmd


def cmd_launch(args: argparse.Namespace) -> int:
    cmd = _server_command(args)
    console = Console(highlight=False)
    ledger = Ledger(args.ledger)
    sinks = _sinks(args, console, f"launch {os.path.basename(cmd[0])}")
    if args.slurm:
        return _launch_slurm(args, cmd, sinks, ledger)
    if args.host:
        try:
            _, verdict, note = start_remote(ssh.Host.parse(args.host), cmd, name=args.name, server=args.server,
                                            url=args.url, stall=args.stall, timeout=args.timeout,
                                            grace=args.grace, kill_on_stall=args.kill_on_stall, sinks=sinks,
                                            ssh_args=args.ssh_arg, ledger=ledger,
                                            port_check=args.port_check == "on")
        finally:
            for sink in sinks:
                sink.close()
        return _finish(sinks, verdict, note)
    try:
        launched = start_and_watch(cmd, name=args.name, server=args.server, log=args.log, url=args.url,
                                   stall=args.stall, timeout=args.timeout, grace=args.grace,
                                   kill_on_stall=args.kill_on_stall, sinks=sinks,
                                   probe_generate=args.probe_generate, ledger=ledger,
                                   port_check=args.port_check == "on")
    except FileNotFoundError as e:
        raise InputError(f"cannot start {cmd[0]}: {e.strerror}") from None
    finally:
        for sink in sinks:
            sink.close()
    code = _finish(sinks, launched.verdict, launched.note)
    if args.attach and launched.verdict.outcome == "ready":
        code = _attach(launched, console)
    return code


def _launch_slurm(args: argparse.Namespace, cmd: list[str], sinks: list, ledger: Ledger,
                  kill_on_stall: bool | None = None) -> slurm.Launched:
    if args.nodes < 1:
        raise InputError("--nodes must be 1 or more")
    host = getattr(args, "host", None)  # firedup run has no --host: its benchmark needs the head reachable from here
    commands = slurm.commands_for(host, getattr(args, "ssh_arg", ()))
    try:
        launched = slurm.launch(cmd, name=args.name, nodes=args.nodes, sbatch_args=args.sbatch_arg,
                                log_dir=args.log_dir, server=args.server, url=args.url, stall=args.stall,
                                timeout=args.timeout, grace=getattr(args, "grace", GRACE),
                                kill_on_stall=kill_on_stall if kill_on_stall is not None else args.kill_on_stall,
                                sinks=sinks, ledger=ledger, commands=commands)
    finally:
        commands.close()
        for sink in sinks:
            sink.close()
    if kill_on_stall is not None:  # firedup run: the caller goes on
        return launched
    return _finish(sinks, launched.verdict, launched.note)


def _attach(launched, console: Console) -> int:
    """Stream the log of a ready server until it exits; Ctrl-C stops it."""
    follower = FileFollower(launched.record.log, launched.offset)
    try:
        while True:
            running = launched.popen.poll() is None
            data = follower.read()
            if data:
                sys.stdout.buffer.write(data)
                sys.stdout.flush()
            if not running:
                break
            time.sleep(0.2)
    except KeyboardInterrupt:
        console.print(f"stopping {launched.record.name}: {process.stop_group(launched.pgid, popen=launched.popen)}")
        return 0
    return 0 if launched.popen.returncode == 0 else 1


def cmd_stop(args: argparse.Namespace) -> int:
    run = registry.load(args.name)
    if run.job:
        print(f"{run.name}: {slurm.stop(run, args.ssh_arg)}")
        return 0
    if run.host:
        print(f"{run.name} on {run.host}: {stop_remote(run, args.grace, args.ssh_arg)}")
        return 0
    if not run.alive():
        print(f"{run.name} is not running")
        return 0
    print(f"{run.name}: {process.stop_group(run.pid, args.grace)}")
    return 0


def cmd_ps(args: argparse.Namespace) -> int:
    rows = [{"name": r.name, "host": r.host, "pid": r.pid, "alive": r.alive(), "server": r.server, "url": r.url,
             "log": r.log, "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started)),
             "cmd": " ".join(r.argv), **({"job": r.job, "job_state": slurm.state(r.job, r.host)} if r.job else {})}
            for r in registry.records()]
    if args.json:
        print(json.dumps(rows))
        return 0
    for r in rows:
        state = {True: "running", False: "exited ", None: "remote "}[r["alive"]]
        where = f"pid {r['pid']:<8}"
        if "job" in r:
            state, where = f"{r['job_state'].lower():<7}", f"job {r['job']:<8}"
        print(f"{r['name']:<32} {state} {where} {r['server'] or '-':<12} {r['url'] or '-':<24} {r['cmd']}")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    found = Ledger(args.ledger).find(name=args.name, server=args.server, since=args.since, limit=args.limit)
    if args.json:
        print(json.dumps(found, default=str))
        return 0
    view.runs_table(found, Console(highlight=False))
    return 0


def _ledger_run(ledger: Ledger, number: int) -> dict:
    run = ledger.get(number)
    if run is None:
        raise InputError(f"no run {number} in the ledger (see firedup runs)")
    return run


def cmd_show(args: argparse.Namespace) -> int:
    run = _ledger_run(Ledger(args.ledger), args.run)
    if args.json:
        print(json.dumps(run, default=str))
        return 0
    view.show(run, Console(highlight=False))
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    ledger = Ledger(args.ledger)
    runs_ = [_ledger_run(ledger, args.a), _ledger_run(ledger, args.b)]
    changes = history.diff(*runs_)
    if args.json:
        print(json.dumps({"a": args.a, "b": args.b, "changes": changes}, default=str))
        return 0
    view.diff(args.a, args.b, changes, Console(highlight=False))
    return 0


def _workload(args: argparse.Namespace) -> Workload:
    return Workload(input_len=args.input_len, output_len=args.output_len,
                    num_prompts=None if args.duration else (args.num_prompts or 100), duration=args.duration,
                    concurrency=args.max_concurrency if args.request_rate else (args.concurrency or 1),
                    request_rate=args.request_rate, burstiness=args.burstiness, dataset=args.dataset,
                    chat=args.chat, seed=args.seed, warmup=args.warmup, temperature=args.temperature,
                    ignore_eos=args.ignore_eos, random_range_ratio=args.random_range_ratio, tokenizer=args.tokenizer)


def _goodput(specs: list[str] | None) -> dict[str, float] | None:
    if not specs:
        return None
    out = {}
    for spec in specs:
        name, _, value = spec.partition(":")
        if name not in ("ttft", "tpot", "e2el") or not value.replace(".", "", 1).isdigit():
            raise InputError(f"--goodput takes ttft:MS, tpot:MS or e2el:MS, not {spec!r}")
        out[name] = float(value)
    return out


def _model(args: argparse.Namespace, launch_run: dict | None) -> tuple[str | None, str]:
    """--model, else the launch's recorded command line or configuration; else
    (None) the benchmark asks /v1/models."""
    if args.model:
        return args.model, "--model"
    found = served_model(launch_run.get("command") or [], launch_run.get("config") or {}) if launch_run else None
    return found or (None, "")


def _bench_results(url: str, args: argparse.Namespace, console: Console, count: int,
                   launch_run: dict | None = None) -> list[BenchResult]:
    workload = _workload(args)
    model, model_source = _model(args, launch_run)
    percentiles = [float(p) for p in args.percentiles.split(",") if p.strip()]
    results = []
    show = console.is_terminal and not args.json
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not show) as progress:
        task = progress.add_task("requests", total=(workload.num_prompts or 0) * count or None)
        for _ in range(count):
            kwargs = {"model": model, "model_source": model_source, "percentiles": percentiles, "goodput": _goodput(args.goodput),
                      "api_key": args.api_key, "on_result": lambda r: progress.advance(task)}
            result = calibrate(workload, **kwargs) if args.calibrate else bench_run(url, workload, **kwargs)
            results.append(result)
    return results


def _aggregate(results: list[BenchResult], across_starts: bool) -> dict:
    metrics = aggregate([{**r.metrics, "client": f"firedup {__version__}", "model": r.model,
                          "model_source": r.model_source,
                          "health": r.health, "speculative": r.speculative} for r in results])
    if len(results) > 1:  # what the run-to-run noise covers
        metrics["repeats_across"] = "server starts" if across_starts else "one server start"
    return metrics


def _bench(url: str, args: argparse.Namespace, console: Console,
           launch_run: dict | None = None) -> tuple[dict, BenchResult]:
    results = _bench_results(url, args, console, args.repeat, launch_run)
    return _aggregate(results, across_starts=False), results[-1]


def _record_bench(ledger: Ledger, metrics: dict, result: BenchResult, launch_run: dict | None,
                  name: str | None) -> int:
    base = launch_run or {}
    return ledger.record(kind="bench", name=name or result.url, host=base.get("host"),
                         command=base.get("command", []), server=base.get("server"), version=base.get("version"),
                         config=base.get("config", {}), environment=base.get("environment", {}),
                         fingerprint=base.get("fingerprint"), outcome="ready" if result.valid else "incomplete",
                         phases={}, workload=result.workload, metrics={**metrics, "requests": result.requests},
                         elapsed=metrics["duration"], log=base.get("log"))


def _target(ledger: Ledger, target: str | None) -> tuple[str, dict | None, str | None]:
    """A URL, a launched server's name or a ledger run id → (url, its launch run, name)."""
    if target is None:
        raise InputError("bench needs the server's URL, a name from firedup ps, or a ledger run id")
    if target.startswith(("http://", "https://")):
        return target, None, None
    name = target
    if target.isdigit():
        name = _ledger_run(ledger, int(target))["name"]
    record = registry.load(name)
    if not record.url:
        raise InputError(f"{name} has no known URL: pass it")
    launches = [r for r in ledger.find(name=name, kind="launch", limit=1)]
    return record.url, launches[0] if launches else None, name


def _show_bench(args, console, metrics, result, run_id) -> int:
    if args.plot:
        plot.bench(result.requests, args.plot, f"run {run_id}: {result.model} at {result.url}")
    if args.json:
        print(json.dumps({**result.to_dict(), **{k: v for k, v in metrics.items() if k != "requests"},
                          "run_id": run_id}, default=str))
    else:
        view.bench_report({**metrics, "health": result.health, "speculative": result.speculative,
                           "warnings": result.warnings}, console)
        console.print(Text(f"recorded as run {run_id} (firedup show {run_id}; firedup compare {run_id} OTHER)", "dim"))
    return 0 if result.valid else 1


def cmd_bench(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    ledger = Ledger(args.ledger)
    if args.calibrate:
        metrics, result = _bench("", args, console)
        return _show_bench(args, console, metrics, result, _record_bench(ledger, metrics, result, None, "calibrate"))
    url, launch_run, name = _target(ledger, args.target)
    metrics, result = _bench(url, args, console, launch_run)
    return _show_bench(args, console, metrics, result, _record_bench(ledger, metrics, result, launch_run, name))


VS = "--vs"  # firedup run [options] -- CMD_A --vs CMD_B


def _start_and_bench(cmd: list[str], name: str | None, args: argparse.Namespace, console: Console, ledger: Ledger,
                     sinks: list, count: int) -> tuple[list[BenchResult], dict | None, str] | int:
    """One server start, benchmarked ``count`` times, then stopped: the
    results, the launch's ledger record and its name, or the exit code of a start that failed."""
    if args.slurm:  # the benchmark is aimed at the head node
        launched = _launch_slurm(args, cmd, list(sinks), ledger, kill_on_stall=True)
    else:
        launched = start_and_watch(cmd, name=name, server=args.server, url=args.url, stall=args.stall,
                                   timeout=args.timeout, kill_on_stall=True, sinks=sinks, ledger=ledger,
                                   port_check=args.port_check == "on")
    try:
        if launched.verdict.outcome != "ready":
            return _finish(sinks or [JsonEvents()], launched.verdict, launched.note)
        if not launched.record.url:
            raise InputError("the server's URL is not known: pass --url")
        launch_run = ledger.get(launched.verdict.run_id)
        return _bench_results(launched.record.url, args, console, count, launch_run), launch_run, launched.record.name
    finally:
        launched.stop()


def cmd_run(args: argparse.Namespace) -> int:
    cmd = _server_command(args)
    console = Console(highlight=False)
    ledger = Ledger(args.ledger)
    sinks = [PlainView(console)] if not args.json else []
    if VS in cmd:
        return _run_interleaved(cmd, args, console, ledger, sinks)
    starts = args.repeat if args.relaunch else 1
    results: list[BenchResult] = []
    for _ in range(starts):
        started = _start_and_bench(cmd, args.name, args, console, ledger, sinks, args.repeat // starts)
        if isinstance(started, int):
            return started
        results += started[0]
    metrics = _aggregate(results, across_starts=starts > 1)
    run_id = _record_bench(ledger, metrics, results[-1], started[1], started[2])
    return _show_bench(args, console, metrics, results[-1], run_id)


def _run_interleaved(cmd: list[str], args: argparse.Namespace, console: Console, ledger: Ledger, sinks: list) -> int:
    """A/B: each configuration started --repeat times, alternately (A B, B A,
    A B, ...: a drift in the machine's load falls on both, and a steady one
    on each first in turn), one benchmark a start; recorded as two runs whose
    repeats compare pair by pair."""
    at = cmd.index(VS)
    commands = {"A": cmd[:at], "B": cmd[at + 1:]}
    if not commands["A"] or not commands["B"] or VS in commands["B"]:
        raise InputError(f"run takes two commands at most: firedup run [options] -- CMD_A {VS} CMD_B")
    if args.repeat < 2:
        raise InputError("an interleaved run needs --repeat 2 or more (the pairs are the noise)")
    results: dict[str, list[BenchResult]] = {"A": [], "B": []}
    launches: dict[str, tuple[dict | None, str]] = {}
    order = ""
    for i in range(args.repeat):
        for side in "AB" if i % 2 == 0 else "BA":
            started = _start_and_bench(commands[side], f"{args.name or 'ab'}-{side.lower()}", args, console,
                                       ledger, sinks, 1)
            if isinstance(started, int):
                return started
            results[side] += started[0]
            launches[side] = started[1:]
            order += side
    group = uuid.uuid4().hex[:12]
    ids = {}
    for side in "AB":
        metrics = _aggregate(results[side], across_starts=True)
        metrics.update(repeats_across="interleaved server starts",
                       interleaved={"group": group, "side": side, "order": order})
        ids[side] = _record_bench(ledger, metrics, results[side][-1], *launches[side])
    report = compare([ledger.get(ids["A"]), ledger.get(ids["B"])], args.min_effect)
    if args.json:
        print(json.dumps({"runs": {"A": ids["A"], "B": ids["B"]}, "order": order, "compare": report}, default=str))
    else:
        view.compare_table(report, console)
        console.print(Text(f"recorded as runs {ids['A']} (A) and {ids['B']} (B), started {' '.join(order)} "
                           f"(firedup compare {ids['A']} {ids['B']})", "dim"))
    valid = all(r.valid for side in results.values() for r in side)
    return 0 if valid else 1


def cmd_compare(args: argparse.Namespace) -> int:
    ledger = Ledger(args.ledger)
    chosen = []
    for number in args.runs:
        run = _ledger_run(ledger, number)
        if run["kind"] != "bench":
            raise InputError(f"run {number} is not a benchmark run (see firedup runs)")
        chosen.append(run)
    if len(chosen) < 2:
        raise InputError("compare needs two runs or more")
    for other in chosen[1:]:
        differences = workload_differences(chosen[0], other, Workload().describe())
        if differences and not args.force:
            listed = "; ".join(f"{k} {a} vs {b}" for k, a, b in differences)
            raise InputError(f"runs {chosen[0]['id']} and {other['id']} measured different workloads ({listed}): "
                             "their numbers are not comparable (--force to compare anyway)")
    report = compare(chosen, args.min_effect)
    if args.plot:
        plot.comparison(report, args.plot)
    if args.json:
        print(json.dumps(report, default=str))
    else:
        view.compare_table(report, Console(highlight=False))
    return 0


COMMANDS = {"diagnose": cmd_diagnose, "bench": cmd_bench, "run": cmd_run, "compare": cmd_compare, "watch": cmd_watch, "launch": cmd_launch, "stop": cmd_stop, "ps": cmd_ps,
            "runs": cmd_runs, "show": cmd_show, "diff": cmd_diff}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (FiredupError, OSError) as e:  # OSError: the system's answer (a file, a socket, a permission)
        print(f"firedup: {e}", file=sys.stderr)
        return USAGE_ERROR


def run() -> None:
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
