"""Command line: arguments in, API calls out."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from datetime import datetime
from urllib.parse import urlsplit

from rich.console import Console

from . import __version__, rules, runs
from .diagnose import InputError, diagnose
from .judge import Verdict
from .ledger import history
from .ledger.memory import Memory
from .launch import start_and_watch, start_remote, stop_remote
from .ledger.store import Ledger, LedgerError
from .rules import FAMILIES, RuleError
from .sinks import summary, view
from .sinks.events import JsonEvents
from .sinks.live import LiveView, PlainView
from .sources import process, ssh
from .sources.file import FileFollower
from .watch import Watch

USAGE_ERROR = 2
SERVERS = (*FAMILIES, "generic")


def _seconds(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value


def _live_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", choices=SERVERS, help="server family (default: detect)")
    p.add_argument("--url", help="the server's base URL for health probes (default: from --host/--port)")
    p.add_argument("--stall", type=_seconds, default=300.0,
                   help="seconds without progress evidence before 'stalled' (default 300)")
    p.add_argument("--timeout", type=_seconds, help="hard cap in seconds (default: none while it progresses)")
    p.add_argument("--grace", type=_seconds, default=30.0,
                   help="seconds a traceback gets for the process to exit or go on (default 30)")
    p.add_argument("--probe-generate", action="store_true",
                   help="ready only once a one-token completion succeeds (needs the URL)")
    p.add_argument("--json", action="store_true", help="JSON events, one a line; the verdict last")


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
                   help="log file, ssh://[user@]host[:port]/abs/path, or - for standard input; several at once")
    w.add_argument("--pid", type=int, help="also watch this process (local or on the remote host of the target)")
    w.add_argument("--all", action="store_true",
                   help="one multi-node server: ready when every target is, failed as soon as one fails")
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
    la.add_argument("--host", help="[user@]host[:port]: start it there over SSH (it survives the connection)")
    _live_options(la)
    _ssh_options(la)
    _ledger_option(la)
    la.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the server's command line")

    st = sub.add_parser("stop", help="stop a server started by firedup launch (SIGTERM, then SIGKILL)")
    st.add_argument("name")
    st.add_argument("--grace", type=_seconds, default=15.0, help="seconds between SIGTERM and SIGKILL")
    _ssh_options(st)

    ps = sub.add_parser("ps", help="list servers started by firedup launch")
    ps.add_argument("--json", action="store_true")

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
        memory.remember(verdict, kind="diagnose", name=None, environment=None,
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
                     grace=args.grace, sinks=sinks, cancel=cancel)
    if args.pid is not None and not process.pid_exists(args.pid):
        raise InputError(f"no process {args.pid}")
    if target != "-" and os.path.isdir(target):
        raise InputError(f"cannot watch {target}: is a directory")
    return Watch(log=None if target == "-" else target, stream=sys.stdin.buffer if target == "-" else None,
                 server=args.server, pid=args.pid, url=args.url, stall=args.stall, timeout=args.timeout,
                 grace=args.grace, sinks=sinks, probe_generate=args.probe_generate, cancel=cancel)


def cmd_watch(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    if len(args.targets) > 1:
        return _watch_many(args, console)
    target = args.targets[0]
    ledger = Ledger(args.ledger)
    sinks = _sinks(args, console, f"watch {target}")
    watch = _watch_for(target, args, sinks)
    try:
        verdict = watch.run()
    finally:
        for sink in sinks:
            sink.close()
        if watch.remote is not None:
            watch.remote.close()
    _remember_watch(ledger, target, verdict)
    return _finish(sinks, verdict)


def _remember_watch(ledger: Ledger, target: str, verdict: Verdict) -> None:
    remote = ssh.parse_target(target)
    host = str(remote[0]) if remote else None
    memory = Memory(ledger, verdict.server, [], host)
    memory.remember(verdict, kind="watch", name=target, environment=None,
                    log=target if remote or target == "-" else os.path.abspath(target))


SEVERITY = ("failed", "stalled", "timeout", "incomplete", "ready")


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
        except (InputError, ssh.SSHError) as e:
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
    for target, verdict in done.items():
        _remember_watch(ledger, target, verdict)
    for target, verdict in done.items():
        Labelled(base, target).verdict(verdict)
    worst_target, worst = min(done.items(), key=lambda item: SEVERITY.index(item[1].outcome))
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


class Labelled:
    """A sink for one of several targets: its events and verdict carry its name."""

    def __init__(self, sink, target: str):
        self.sink = sink
        self.target = target

    def event(self, t: float, name: str, **fields) -> None:
        if isinstance(self.sink, JsonEvents):
            self.sink.event(t, name, target=self.target, **fields)
        else:
            self.sink.event(t, f"{self.target} {name}", **fields)

    def update(self, view: dict) -> None:
        pass

    def verdict(self, verdict: Verdict, note: str | None = None) -> None:
        if isinstance(self.sink, JsonEvents):
            self.sink.event(verdict.elapsed, verdict.outcome, target=self.target, **verdict.to_dict())
        else:
            self.sink.console.print(f"{self.target}:")
            self.sink.verdict(verdict, note)

    def close(self) -> None:
        pass


def cmd_launch(args: argparse.Namespace) -> int:
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise InputError("launch needs a command: firedup launch [options] -- CMD ...")
    console = Console(highlight=False)
    ledger = Ledger(args.ledger)
    sinks = _sinks(args, console, f"launch {os.path.basename(cmd[0])}")
    if args.host:
        try:
            _, verdict, note = start_remote(ssh.Host.parse(args.host), cmd, name=args.name, server=args.server,
                                            url=args.url, stall=args.stall, timeout=args.timeout,
                                            grace=args.grace, kill_on_stall=args.kill_on_stall, sinks=sinks,
                                            ssh_args=args.ssh_arg, ledger=ledger)
        finally:
            for sink in sinks:
                sink.close()
        return _finish(sinks, verdict, note)
    try:
        launched = start_and_watch(cmd, name=args.name, server=args.server, log=args.log, url=args.url,
                                   stall=args.stall, timeout=args.timeout, grace=args.grace,
                                   kill_on_stall=args.kill_on_stall, sinks=sinks,
                                   probe_generate=args.probe_generate, ledger=ledger)
    except FileNotFoundError as e:
        raise InputError(f"cannot start {cmd[0]}: {e.strerror}") from None
    except ValueError as e:
        raise InputError(str(e)) from None
    finally:
        for sink in sinks:
            sink.close()
    code = _finish(sinks, launched.verdict, launched.note)
    if args.attach and launched.verdict.outcome == "ready":
        code = _attach(launched, console)
    return code


def _attach(launched, console: Console) -> int:
    """Stream the log of a ready server until it exits; Ctrl-C stops it."""
    follower = FileFollower(launched.run.log, launched.offset)
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
        console.print(f"stopping {launched.run.name}: {process.stop_group(launched.pgid, popen=launched.popen)}")
        return 0
    return 0 if launched.popen.returncode == 0 else 1


def cmd_stop(args: argparse.Namespace) -> int:
    run = runs.load(args.name)
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
             "cmd": " ".join(r.argv)} for r in runs.all_runs()]
    if args.json:
        print(json.dumps(rows))
        return 0
    for r in rows:
        state = {True: "running", False: "exited ", None: "remote "}[r["alive"]]
        print(f"{r['name']:<32} {state} pid {r['pid']:<8} {r['server'] or '-':<12} {r['url'] or '-':<24} {r['cmd']}")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    found = Ledger(args.ledger).find(name=args.name, server=args.server, since=args.since, limit=args.limit)
    if args.json:
        print(json.dumps(found, default=str))
        return 0
    view.runs_table(found, Console(highlight=False))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    run = Ledger(args.ledger).get(args.run)
    if run is None:
        raise LookupError(f"no run {args.run} in the ledger (see firedup runs)")
    if args.json:
        print(json.dumps(run, default=str))
        return 0
    view.show(run, Console(highlight=False))
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    ledger = Ledger(args.ledger)
    runs_ = [ledger.get(args.a), ledger.get(args.b)]
    for number, run in zip((args.a, args.b), runs_):
        if run is None:
            raise LookupError(f"no run {number} in the ledger (see firedup runs)")
    changes = history.diff(*runs_)
    if args.json:
        print(json.dumps({"a": args.a, "b": args.b, "changes": changes}, default=str))
        return 0
    view.diff(args.a, args.b, changes, Console(highlight=False))
    return 0


COMMANDS = {"diagnose": cmd_diagnose, "watch": cmd_watch, "launch": cmd_launch, "stop": cmd_stop, "ps": cmd_ps,
            "runs": cmd_runs, "show": cmd_show, "diff": cmd_diff}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (InputError, RuleError, LookupError, ssh.SSHError, LedgerError, ValueError) as e:
        print(f"firedup: {e}", file=sys.stderr)
        return USAGE_ERROR


def run() -> None:
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
