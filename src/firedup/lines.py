"""Raw log text → clean lines: ANSI removed, and the prefixes servers, workers,
loggers and container runtimes put in front of a message split off, so that
rules match the message whatever wrote it."""

from __future__ import annotations

import json
import re
from typing import NamedTuple

# The escape sequences, and the printable forms of a colour code: rsyslog writes
# ESC as "#033" ("#033[1;36m(VllmWorker rank=3 pid=1)#033[0;0m"), a Windows console
# shows it as "←", a terminal's caret notation (less, cat -v, a copy from one) as "^[".
ANSI = re.compile(r"(?:\x1b|←)\[[0-9;:?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
                  r"|(?:#033|\^\[)\[[0-9;]*m")
# Colour codes whose escape a copy lost: "[36m(pid=860)[0m INFO ...". Only on a line
# that resets the colour, as every coloured prefix does.
_BARE_SGR = re.compile(r"\[[0-9][0-9;]*m")  # with a number: "[main.rs" is no colour code
# Python's warnings module ("x.py:102: UserWarning: ..."): a warning whatever the record around it says
PY_WARNING = re.compile(r"\S\.py:\d+: \w*Warning: ")

# Each pattern removes one prefix; they are tried again until none applies, so
# stacked prefixes (docker timestamp + SGLang bracket, worker + vLLM level) peel
# off in any order. Group "origin" names the writer, group "level" the level.
_PREFIXES = [
    # a log store's export of each line behind its time in epoch milli- or nanoseconds and a
    # tab ("1779264164797\t", the ISO time and a tab after it, below)
    re.compile(r"\d{13}(?:\d{6})?\t"),
    # a log console's columns, as pasted: "  | 2025-03-07T05:56:27.270Z | "
    re.compile(r"[\s\xa0]*\| \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z? \| "),
    # a log viewer's timestamp column, as copied from it: "2026-04-19 13:04:53.903 | "
    re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? \| "),
    # syslog / journalctl: "Dec  1 10:00:00 gpu01 vllm[1234]: ", with --output=short-iso a date;
    # the host left out of a paste too
    re.compile(r"(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?"
               r"(?:[+-]\d\d:?\d\d|Z)?) (?:[\w.-]+ )?(?P<origin>[\w.@/-]+\[\d+\]): "),
    # moreutils' ts, as a launch script pipes through it: "Dec 02 01:51:33 ", "00:00:05 " (ts -s)
    re.compile(r"(?:[A-Z][a-z]{2} [ \d]\d )?\d\d:\d\d:\d\d(?:\.\d+)? "),
    # docker compose service column: "ollama  | ", podman-compose's "[ollama] | ", a swarm
    # service's task "vllm.1.8o9x2x@node1    | ", pm2's process id and name "0|vllm     | "
    re.compile(r"(?P<origin>\[[\w.-]+\]|(?:\d+\|)?[\w.@-]+)\s+\| "),
    # ISO / docker timestamps: "2025-02-04 21:21:33 ", "2025-10-13T22:12:09.754618Z  INFO "
    re.compile(
        r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
        # one space only when no level follows: a traceback's frames keep their indent
        # (and not a vLLM record's own level: "ERROR 07-11 15:21:48 [x.py:1] ", NIM's with the year)
        r"(?:\s+(?P<level>TRACE|DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL)\s+(?!(?:\d{4}-)?\d\d-\d\d \d\d:)| |\t)"
    ),
    # the border Python 3.11+ draws around an exception group and each exception in it
    # ("  + Exception Group Traceback ...", "  |   File ...", "    | ValueError: x"); the
    # one space after it only: the frames inside keep their indent
    re.compile(r" {2,}(?:\+ (?=Exception Group Traceback)|\| (?= {0,8}\S))"),
    # a CI runner's timestamp (Buildkite, as vLLM's CI logs show it): "[2025-05-23T04:39:51Z] ";
    # one space only: a traceback's frames keep their indent
    re.compile(r"\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\] "),
    # a logging format of bracketed fields: "[2025-03-05 14:28:45,820] [ERROR] [MainThread] [vllm.worker] >>> "
    re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\] \[(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\] "
               r"(?:\[[^\]\s]*\] )*(?:>+ )?"),
    # a logging format of adjacent brackets, the source file's only on some records (an SGLang
    # deployment's log config): "[2026-03-13 15:56:59][prefill.py:290][ERROR]: ", "[2026-03-13 15:56:59][INFO]: "
    re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\](?:\[[\w.-]+:\d+\])?"
               r"\[(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\]:? "),
    # SGLang: "[2025-04-09 05:05:13 TP0] ", "[2025-04-09 05:05:13 DP0 TP0 EP0] "
    re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?: (?P<origin>[A-Z]+\d+(?: [A-Z]+\d+)*))?\] "),
    # vLLM / Ray workers: "(APIServer pid=1805) ", "(VllmWorker rank=0 pid=12) ", "(VllmWorker
    # TP1 pid=7) ", Ray's "(pid=4242, ip=10.0.0.2) ", "(ServeReplica:default:LLMServer pid=77) ", "(raylet) "
    re.compile(r"(?P<origin>\((?:[\w.:-]+,? ){0,2}(?:rank|pid|ip|node)=[\w.:-]+(?:,? (?:rank|pid|ip|node)=[\w.:-]+)*\)"
               r"|\(raylet(?:, ip=[\d.]+)?\)) ?"),
    # vLLM-Omni's stage of a multi-stage pipeline, after its worker's prefix: "[Stage-0] "; a
    # launcher's tag for each server of a disaggregated deployment: "[prefill-0] ", "[decode-1] "
    re.compile(r"(?P<origin>\[Stage-\d+\]|\[[a-z][a-z_]*-\d+\]) "),
    # vLLM levels: "INFO 04-25 08:50:55 [file.py:44] ", old "INFO 10-12 00:26:58 launcher.py:27] ",
    # NVIDIA NIM's (vLLM's and its own records): "INFO 2025-12-07 23:26:58.596 on.py:62] "
    re.compile(
        r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
        r"(?:\[[^\]\s]+\] |[\w.-]+:\d+\] )"
    ),
    # torch distributed ranks: "[rank0]: ", "[rank0]:[W1028 ..." (its C++ log, below)
    re.compile(r"(?P<origin>\[rank\d+\])(?::? |:(?=\[))"),
    # Python logging's default format: "INFO:tgi-server:", "WARNING:root:". Its level is
    # not taken: a wrapper relaying a server's lines logs every one of them at INFO
    re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):(?P<origin>[\w.-]+):"),
    # a logging format "%(asctime)s - %(levelname)s - %(name)s: " relaying a server's lines
    # (after its timestamp): "- INFO - vLLM: ERROR 07-13 ...". Its level is not taken, as above
    re.compile(r"- (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - (?P<origin>[\w.-]+): "),
    # a wrapper echoing its child server's streams: Unsloth's "vLLM STDOUT: ", "server stderr: ", "[stderr] ";
    # a container runtime's log file (CRI, a Kubernetes node's /var/log/pods), after its timestamp: "stderr F "
    re.compile(r"(?:(?P<origin>[\w.-]+) )?(?:STDOUT|STDERR|stdout|stderr): |\[(?:STDOUT|STDERR|stdout|stderr)\] "
               r"|(?:stdout|stderr) [FP] "),
    # uvicorn: "INFO:     ", behind its logger's name where a format puts it (KServe's
    # "%(asctime)s %(name)s %(levelprefix)s": "uvicorn.error INFO:     "); a lowercase dotted
    # name only, so that a message of its own ("CUDA ERROR: ...") keeps its words
    re.compile(r"(?:uvicorn(?:\.\w+)? |[a-z_]\w*(?:\.\w+)+ )?(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+"),
    # llama.cpp log format: "0.03.017.828 I "
    re.compile(r"\d+\.\d\d\.\d\d\d\.\d\d\d (?P<level>[DIWE]) "),
    # llama.cpp's 2023-2024 log file (llama.log, llamafile): a unix time, then the
    # source file, line and function: "[1714488619] [llama.cpp/llava/clip.cpp:  903][  clip_model_load] "
    re.compile(r"\[\d{9,11}\] (?:\[ *[^\]\s]+: *\d+\]\[ *\w+\] )?"),
    # glog (Triton): "E0306 16:40:07.708802 117 backend_model.cc:691] "
    re.compile(r"(?P<level>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w.-]+:\d+\] "),
    # PyTorch's C++ log (c10, c10d, NCCL's process group), after "[rank0]:" when it has one:
    # "[W1028 11:50:13.091528000 TCPStore.cpp:347] ", a month of one digit unpadded ("[E814 17:27:59.408557873 "),
    # no time before torch 2.2: "[W socket.cpp:436] "
    re.compile(r"\[(?P<level>[IWEF])(?:\d{3,4} \d\d:\d\d:\d\d\.\d+)? [\w.-]+:\d+\] "),
    # TensorRT-LLM: "[TensorRT-LLM][INFO] ", "[TRT-LLM] [I] ", after its "[06/02/2026-03:50:10] "; 1.3's
    # module tag after it, with the rank where there is one: "[executor] ", "[batchmgr][RANK 0] "; the
    # PyTorch backend's rank before the level: "[TRT-LLM] [RANK 0] [E] "
    re.compile(r"\[(?:TensorRT-LLM|TRT-LLM)\]\s?(?:\[RANK \d+\] )?\[(?P<level>[A-Z]+)\] "
               r"(?:\[[a-z_]+\](?P<origin>\[RANK \d+\])? ?)?"),
    re.compile(r"\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\] "),
    # lmdeploy / python logging: "lmdeploy - INFO - [pid=1 ppid=0] - async_engine.py:130 - " (after its timestamp)
    re.compile(r"(?:- )?(?P<origin>[\w.]+) - (?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) - "
               r"(?:\[pid=\d+ ppid=\d+\] - )?(?:[\w.]+:\d+ - )?"),
]



def _one_of(patterns: list[re.Pattern]) -> tuple[re.Pattern, dict[str, tuple[str | None, str | None]]]:
    """All prefixes in one alternation, tried in order like the list. Each
    alternative is group ``p3`` and its groups become ``origin3``/``level3``;
    the map tells, for the alternative that matched, which groups it has."""
    parts, groups = [], {}
    for i, p in enumerate(patterns):
        parts.append(f"(?P<p{i}>" + re.sub(r"\(\?P<(origin|level)>", rf"(?P<\g<1>{i}>", p.pattern) + ")")
        groups[f"p{i}"] = (f"origin{i}" if "origin" in p.groupindex else None,
                           f"level{i}" if "level" in p.groupindex else None)
    return re.compile("|".join(parts)), groups


_PREFIX, _PREFIX_GROUPS = _one_of(_PREFIXES)
# What a scheduler's log collection puts first on every line, before anything the
# server wrote: Slurm's "srun --label" task number ("0: "), "kubectl logs
# --prefix" ("[pod/vllm-0/server] "), stern's pod and container ("vllm-7d9c6b5f4-x2k8p
# vllm ": a Deployment's pod, by its two hashes) and kubetail's pod ("[vllm-7d9c6b5f4-x2k8p] ").
# A file shown with its line numbers (cat -n: "    12\t"; a blank line, its number
# alone) too. Only at the very start: a message of the server's own may begin with a
# number and a colon.
_COLLECTOR = re.compile(r"\d{1,4}: | *\d{1,7}\t| +\d{1,7} $|(?P<origin>\[pod/[\w.-]+/[\w.-]+\]"
                        r"|\[?[a-z0-9][a-z0-9.-]*-[a-z0-9]{8,10}-[a-z0-9]{5}(?:\]| [a-z0-9][a-z0-9-]*)) ")
# A markdown quote's marker, as a reply quoting a log puts it before every line
# ("> ", nested "> > "), the line's own indent kept after it.
_QUOTE = re.compile(r"(?:> ?)+")
_EMPTY_RECORD = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?"
                           r" (?:\[[^\]\s]+\]|[\w.-]+:\d+\])$")
_RAY_REPEAT = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
_LEVELS = {
    "W": "WARNING", "WARN": "WARNING", "E": "ERROR", "F": "FATAL", "I": "INFO", "D": "DEBUG",
}


class Line(NamedTuple):
    text: str  # the line as written, ANSI codes and trailing whitespace removed
    message: str  # the text with known prefixes removed: what rules match
    origin: str  # the worker or service that wrote it ("" when unknown)
    level: str  # normalised log level ("" when unknown)
    # the outermost prefix's origin (docker compose's service around "[... TP2]"):
    # what the unprefixed lines of a record carry once a wrapper prefixes them
    outer: str = ""


def clean(raw: str) -> str:
    """Remove ANSI escape sequences (and their printable forms), holes (runs of
    NULs: a log truncated under a writer that kept its offset, as logrotate's
    copytruncate leaves it, goes on after one) and trailing whitespace; no-break
    spaces are spaces."""
    if "\x00" in raw:
        raw = _HOLE.sub("", raw)
    if "\x1b" in raw or "#033[" in raw or "←[" in raw or "^[[" in raw:
        raw = ANSI.sub("", raw)
    if "[0m" in raw or "[0;0m" in raw:
        raw = _BARE_SGR.sub("", raw)
    if "\xa0" in raw:
        raw = raw.replace("\xa0", " ")  # copied from a rendered page or a chat: its spaces came as no-break ones
    return raw.rstrip()


_HOLE = re.compile("\x00{16,}")
# A log copied from a rendered GitHub page: the page turned "main.rs:317" into a
# link, which its markdown source then carries ("[main.rs:317](http://main.rs:317/)").
_AUTOLINK = re.compile(r"\[([^\]\s]+)\]\(https?://[^)\s]*\)")


def _unquote(message: str) -> str:
    quote = _QUOTE.match(message)
    return message[quote.end():] if quote else message


def parse(raw: str) -> Line:
    text = clean(raw)
    message = _AUTOLINK.sub(r"\1", text) if "](http" in text else text
    origin = level = outer = ""
    if message.startswith(">"):  # the check spares nearly every line the match
        message = _unquote(message)
    peeled = False
    # a prefix whose line is otherwise blank lost its trailing space to rstrip: it is
    # matched with it, and leaves the blank line (which keeps a traceback's chain together)
    collector = _COLLECTOR.match(message + " ")
    if collector is not None:
        origin = outer = collector.group("origin") or ""
        message = message[collector.end():]
        peeled = True
    for _ in range(6):
        if peeled and message.startswith(">"):
            message = _unquote(message)  # a quote relayed under a collector's prefix
        m = _PREFIX.match(message + " ")
        if m is None or not message:
            break
        origin_group, level_group = _PREFIX_GROUPS[m.lastgroup or ""]
        origin = origin_group and m.group(origin_group) or origin
        outer = outer or origin
        level = level_group and m.group(level_group) or level
        message = message[m.end():]
        peeled = True
    if len(message) > 4 and message.startswith("**") and message.endswith("**"):
        message = message[2:-2]  # a line a reporter made bold in markdown
    if message.endswith("across cluster]"):
        message = _RAY_REPEAT.sub("", message)
    elif empty := _EMPTY_RECORD.match(message):
        # a logged traceback's blank line (between an exception and its chain): the
        # record's prefix alone, its trailing space stripped
        message, level = "", empty.group("level")
    return Line(text, message, origin, _LEVELS.get(level, level), outer)


def record_lines(text: str) -> list[str] | None:
    """The lines a structured log record stands for (see from_json), also behind
    a prefix a collector put before it (docker compose's service, kubectl's
    timestamp), which each of them keeps. None when the text holds no record."""
    if not text.rstrip().endswith("}"):
        return None
    start = text.find("{")
    if start < 0 or (start and not parse(text).message.startswith("{")):
        return None
    plain = from_json(text[start:].rstrip())
    return [text[:start] + piece for piece in plain] if plain is not None else None


_DATED = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d")


def from_json(text: str) -> list[str] | None:
    """A structured log record (TGI's --json-output; a JSON logging config) as the
    lines the server prints without it: "<time>  <LEVEL> <span>: <target>: <message>"
    as Rust's tracing writes it, a message of several lines (a traceback) as several
    lines. None when the text is not such a record."""
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict) or "function" in record:
        return None  # llama.cpp's JSON log format, which its rules read as written
    fields = record.get("fields")
    message = fields.get("message") if isinstance(fields, dict) else record.get("message", record.get("msg"))
    if not isinstance(message, str) and isinstance(record.get("log"), str):
        # Docker's json-file driver (and shippers that keep its shape: {"log": ..., "stream": ...,
        # "time": ...}): the line as the server wrote it, prefixes and all
        return record["log"].rstrip("\r\n").split("\n")
    if not isinstance(message, str):
        return None
    stamp = _text(record, "timestamp", "time", "asctime")
    level = _text(record, "level", "levelname").upper()
    span = record.get("span")
    where = [_text(span, "name") if isinstance(span, dict) else "", _text(record, "target")]
    if where[1] and record.get("filename") and record.get("line_number"):
        where.append(f"{record['filename']}:{record['line_number']}")
    # the prefixes lines.parse peels: a dated time with its level, or uvicorn's level
    # alone (a time without its year, as NIM's "02-20 21:47:39.340", is left out)
    if not _DATED.match(stamp):
        stamp = ""
    lead = f"{stamp}  {level} " if stamp and level else f"{level}: " if level else f"{stamp} " if stamp else ""
    first, *rest = message.split("\n")
    return [lead + "".join(f"{w}: " for w in where if w) + first, *rest]


def _text(record: dict, *keys: str) -> str:
    """The first of these keys whose value is a string."""
    return next((v for v in map(record.get, keys) if isinstance(v, str)), "")
