"""The command line's arguments: the parser, and the options of each command
as the library takes them."""

from __future__ import annotations

import argparse
import math
import os
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import NoReturn

from . import __version__
from ._exceptions import InputError
from ._run import VS
from ._servers import SlurmJob, Start
from ._targets import Follow
from .bench.compare import MIN_EFFECT_PCT
from .bench.metrics import checked_percentile
from .bench.session import Measure
from .bench.workload import Workload
from .defaults import GRACE, QUIET, STALL, STOP_GRACE
from .registry import KEEP_ENDED
from .rules import FAMILIES

SERVERS = (*FAMILIES, "generic")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < math.inf:  # NaN and inf too: no deadline would ever pass
        raise argparse.ArgumentTypeError(f"must be a finite positive number of seconds, not {text}")
    return value


def _at_least(least: int) -> Callable[[str], int]:
    """A whole number, ``least`` or more (a count of requests, repeats, nodes ...)."""

    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be {least} or more, not {value}")
        return value

    return whole


_count = _at_least(1)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _not_negative(text: str) -> float:
    """A temperature, a percentage of change: 0 or more, and finite."""
    value = _number(text)
    if not 0 <= value < math.inf:  # NaN too
        raise argparse.ArgumentTypeError(f"must be a finite number, 0 or more, not {text}")
    return value


def _ratio(text: str) -> float:
    """--random-range-ratio, in [0, 1) as vllm bench serve takes it: refused before a server is started for it."""
    value = _number(text)
    if not 0 <= value < 1:  # NaN too
        raise argparse.ArgumentTypeError(f"must be in [0, 1), not {text}")
    return value


def _rate(text: str) -> float:
    """Requests a second; inf, as vllm bench serve takes it: every request at once."""
    value = _number(text)
    if not value > 0:  # NaN too
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    return value


def _shape(text: str) -> float:
    """A gamma distribution's shape (--burstiness): its scale is 1 / (rate · shape), which inf makes 0."""
    value = _number(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number more than 0, not {text}")
    return value


def _percentiles(text: str) -> list[float]:
    """Comma-separated percentiles, each in [0, 100]: a bad one is refused before the run, not after it."""
    try:
        return [checked_percentile(_number(item)) for item in filter(None, (part.strip() for part in text.split(",")))]
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _live_options(p: argparse.ArgumentParser, url_default: str) -> None:
    p.add_argument("--server", choices=SERVERS, help="server family (default: detect)")
    p.add_argument("--url", help=f"the server's base URL for health probes (default: {url_default})")
    p.add_argument("--stall", type=_seconds, default=STALL,
                   help=f"seconds without progress evidence before 'stalled' (default {STALL:g})")
    p.add_argument("--timeout", type=_seconds, help="hard cap in seconds (default: none while it progresses)")
    p.add_argument("--grace", type=_seconds, default=GRACE,
                   help=f"seconds a traceback gets for the process to exit or go on (default {GRACE:g})")
    p.add_argument("--probe-generate", action="store_true",
                   help="ready only once a one-token completion succeeds (needs the URL: --url, or launch's from the "
                        "command; a server probed from this machine)")
    p.add_argument("--json", action="store_true", help="JSON events, one a line; the verdict last")


def _port_check_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port-check", choices=("on", "off"), default="on",
                   help="on (default): a port someone already listens on fails the start at once, naming them")


def _bench_options(p: argparse.ArgumentParser) -> None:
    load = p.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=_count, help="requests in flight at once (default 1)")
    load.add_argument("--request-rate", type=_rate,
                      help="requests per second (Poisson arrivals); inf: all at once, as vllm bench serve's default")
    p.add_argument("--burstiness", type=_shape, default=1.0, help="gamma shape of arrivals (1: Poisson)")
    p.add_argument("--max-concurrency", type=_count, help="with --request-rate: a cap on requests in flight")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--num-prompts", type=_count, help="how many requests (default 100)")
    size.add_argument("--duration", type=_seconds, help="send requests for this many seconds")
    p.add_argument("--input-len", type=_count, default=256, help="tokens of a random prompt (default 256)")
    p.add_argument("--random-range-ratio", type=_ratio, default=0.0, metavar="R",
                   help="lengths uniform in [L·(1-R), L·(1+R)], as vllm bench serve (default 0)")
    p.add_argument("--tokenizer", metavar="PATH|MODEL_DIR",
                   help="build prompts from this tokenizer's token ids, as vllm bench serve (needs firedup[tokenizer]; "
                        "default: the server's tokenize endpoint, else words calibrated on its usage)")
    p.add_argument("--output-len", type=_count, default=128, help="max tokens of an answer (default 128)")
    p.add_argument("--dataset", help="JSONL prompts ({\"prompt\": ..., \"output_len\": ...}) or a ShareGPT file")
    p.add_argument("--warmup", type=_at_least(0), default=2, help="requests sent first and not counted")
    p.add_argument("--chat", action="store_true", help="use /v1/chat/completions")
    p.add_argument("--model", help="the served model's name (default: from the launch's command line or "
                                   "configuration, else the first of /v1/models)")
    p.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"),
                   help="sent as a bearer token (default: OPENAI_API_KEY); never recorded")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=_not_negative, default=0.0)
    p.add_argument("--ignore-eos", action="store_true", help="ask the server to generate all --output-len tokens")
    p.add_argument("--goodput", nargs="+", metavar="SLO:MS", help="e.g. ttft:500 tpot:50 (e2el too)")
    p.add_argument("--percentiles", type=_percentiles, default="99", help="comma-separated, e.g. 50,90,99 (0 to 100)")
    p.add_argument("--repeat", type=_count, default=1, help="run K times to tell a change from noise")
    p.add_argument("--calibrate", action="store_true", help="measure the client's own ceiling on a zero-work server")
    p.add_argument("--plot", metavar="FILE.png", help="throughput and latency over time (needs matplotlib)")
    p.add_argument("--json", action="store_true")


def _min_effect_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-effect", type=_not_negative, default=MIN_EFFECT_PCT, metavar="PCT",
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
    p.add_argument("--nodes", type=_count, default=1, help="with --slurm: nodes, one task (and log) each (default 1)")
    p.add_argument("--log-dir", help="with --slurm: the folder of the job's logs, seen by every node "
                                     "(default ~/.local/state/firedup/logs)")


def _ssh_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ssh-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for ssh (repeatable; also FIREDUP_SSH_ARGS, e.g. '-F /path/config')")


class _Parser(argparse.ArgumentParser):
    """A usage error in one line, as any other bad input is said (the usage is --help's)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_command_line(self, argv: list[str] | None) -> argparse.Namespace:
        """parse_args, with an unknown argument said against its command, whose --help lists what it takes
        (argparse says it on the top parser)."""
        args, extras = self.parse_known_args(argv)
        if extras:
            prog = f"{self.prog} {args.command}"
            self.exit(2, f"{prog}: error: unrecognized arguments: {' '.join(extras)} (see {prog} --help)\n")
        return args


def parser() -> _Parser:
    parser = _Parser(prog="firedup", description="Start, watch and diagnose LLM inference servers.")
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
                                   "to a verdict. Exit code: 0 ready, 1 failed, 2 bad input, 3 stalled, 4 timeout, "
                                   "5 incomplete (stopped from outside before ready; standard input redirected from a "
                                   "file that ends before a verdict; a pipe's end is its writer's exit), "
                                   "130 Ctrl-C, 143 SIGTERM.")
    w.add_argument("targets", nargs="+", metavar="target",
                   help="log file, ssh://[user@]host[:port]/abs/path, slurm://[[user@]host/]JOBID (through that login "
                        "node), or - for standard input; "
                        "several at once")
    w.add_argument("--pid", type=_count, help="also watch this process (local or on the remote host of the target)")
    w.add_argument("--all", action="store_true",
                   help="one multi-node server: ready when every target is, failed as soon as one fails")
    w.add_argument("--quiet", type=_seconds, default=QUIET,
                   help="with no process known (no --pid, no writer found): seconds of silence after a fatal "
                        f"exception that make it failed (default {QUIET:g})")
    _live_options(w, "none: the log alone decides")
    _ssh_options(w)
    _ledger_option(w)

    la = sub.add_parser("launch", help="start a server and follow it to a verdict",
                        description="Start CMD detached (own session, output to a log file), follow it live, "
                                    "and exit with the verdict. Ready: it keeps running. Failed, timeout or "
                                    "Ctrl-C: its process group is stopped. Stalled: left running unless "
                                    "--kill-on-stall. Exit code: 0 ready, 1 failed, 2 bad input, 3 stalled, "
                                    "4 timeout, 5 incomplete (stopped from outside before ready), 130 Ctrl-C, "
                                    "143 SIGTERM.")
    la.add_argument("--name", help="a name for firedup stop / ps (default: family and time)")
    la.add_argument("--log", help="log file (default: under ~/.local/state/firedup/logs)")
    la.add_argument("--attach", action="store_true", help="after ready, stay and stream the log; Ctrl-C stops it")
    la.add_argument("--kill-on-stall", action="store_true", help="stop a stalled server too")
    la.add_argument("--host", help="[user@]host[:port]: start it there over SSH (it survives the connection); "
                                   "with --slurm, the login node that submits and follows the job")
    _port_check_option(la)
    _slurm_options(la)
    _live_options(la, "from the server command's own --host/--port, or its family's default port")
    _ssh_options(la)
    _ledger_option(la)
    la.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the server's command line")

    st = sub.add_parser("stop", help="stop a server started by firedup launch (SIGTERM, then SIGKILL)")
    st.add_argument("name")
    st.add_argument("--grace", type=_seconds, default=STOP_GRACE, help="seconds between SIGTERM and SIGKILL")
    _ssh_options(st)

    ps = sub.add_parser("ps", help="list servers started by firedup launch")
    ps.add_argument("--all", action="store_true",
                    help=f"the ended ones too (exited, or stopped by firedup stop; the last {KEEP_ENDED} are kept)")
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
    rn.add_argument("--url", help="the server's base URL (default: from the server command's own --host/--port)")
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
    rs.add_argument("--limit", type=_count, default=20)
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


def server_command(args: argparse.Namespace) -> list[str]:
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise InputError(f"{args.command} needs a command: firedup {args.command} [options] -- CMD ...")
    return cmd


def commands(args: argparse.Namespace) -> tuple[list[str], list[str] | None]:
    """firedup run's command, and the one after --vs to compare it with (None)."""
    cmd = server_command(args)
    if VS not in cmd:
        return cmd, None
    at = cmd.index(VS)
    a, b = cmd[:at], cmd[at + 1:]
    if not a or not b or VS in b:
        raise InputError(f"run takes two commands at most: firedup run [options] -- CMD_A {VS} CMD_B")
    return a, b


def follow(args: argparse.Namespace) -> Follow:
    return Follow(server=args.server, url=args.url, pid=args.pid, stall=args.stall, timeout=args.timeout,
                  grace=args.grace, quiet=args.quiet, probe_generate=args.probe_generate, ssh_args=args.ssh_arg)


def slurm_job(args: argparse.Namespace) -> SlurmJob | None:
    return SlurmJob(args.nodes, args.sbatch_arg, args.log_dir) if args.slurm else None


def start(args: argparse.Namespace) -> Start:
    return Start(name=args.name, server=args.server, url=args.url, log=args.log, stall=args.stall,
                 timeout=args.timeout, grace=args.grace, kill_on_stall=args.kill_on_stall,
                 probe_generate=args.probe_generate, port_check=args.port_check == "on", host=args.host,
                 slurm=slurm_job(args),
                 ssh_args=args.ssh_arg)


def workload(args: argparse.Namespace) -> Workload:
    return Workload(input_len=args.input_len, output_len=args.output_len,
                    num_prompts=None if args.duration else (args.num_prompts or 100), duration=args.duration,
                    concurrency=args.max_concurrency if args.request_rate else (args.concurrency or 1),
                    request_rate=args.request_rate, burstiness=args.burstiness, dataset=args.dataset,
                    chat=args.chat, seed=args.seed, warmup=args.warmup, temperature=args.temperature,
                    ignore_eos=args.ignore_eos, random_range_ratio=args.random_range_ratio, tokenizer=args.tokenizer)


def measure(args: argparse.Namespace) -> Measure:
    return Measure(repeat=args.repeat, model=args.model, api_key=args.api_key, calibrate=args.calibrate,
                   percentiles=args.percentiles,
                   goodput=goodput(args.goodput))


def goodput(specs: list[str] | None) -> dict[str, float] | None:
    if not specs:
        return None
    out = {}
    for spec in specs:
        name, _, value = spec.partition(":")
        if name not in ("ttft", "tpot", "e2el") or not value.replace(".", "", 1).isdigit() or not float(value) > 0:
            raise InputError(f"--goodput takes ttft:MS, tpot:MS or e2el:MS (MS more than 0), not {spec!r}")
        out[name] = float(value)
    return out
