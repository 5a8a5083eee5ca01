"""The judge: a pure state machine from signals and clock readings to a verdict.

No I/O and no sleeping: every method takes ``now`` (seconds, any monotonic
origin), so tests drive it with a fake clock. It owns every deadline: the stall
window, the hard timeout, and the grace period a traceback gets while its
process is still alive.

Rules for the outcome:
- a ``fatal`` line decides ``failed`` at once, before or after ready, when a
  cause is named; otherwise after ``settle`` seconds of silence, as the lines
  that name the cause (a worker's traceback) often follow it;
- exceptions before ready are pending: the process exiting, the grace period
  passing without progress, or the end of a finished log makes them ``failed``;
  a later phase, moving progress or ready clears them (a bar's first reading,
  even in a phase it begins, has not moved);
- with no process known (a log watched alone), an exception followed by
  ``quiet`` seconds of silence is ``failed``, and a start stopped from outside
  followed by that silence ``stalled``: nothing else will say so. A later
  calm line (INFO or DEBUG, not a heartbeat, not a shutdown line) shows the
  server went on, and disarms that; the stall window still applies;
- a log that stops inside a traceback, its frames written but not its
  exception line (the rest held in a block-buffered stdout or a relay), waits
  for it: neither ``settle``, ``quiet`` nor ``grace`` decides until it comes or
  ``grace`` passes after the last line;
- a stall window that passes with an exception pending is ``failed`` (what
  a finished log with that exception is), not ``stalled``;
- after ready, exceptions are request or shutdown noise unless raised in the
  engine's own step (vLLM V0's engine loop, V1's worker executing the model:
  the engine died of it, before it says so), or the process then exits with an
  error, or the server then shuts itself down (a shutdown line,
  no stop from outside) after a line that names a root cause: an exception,
  or a cause line with no exception of its own (an allocator's OOM message);
- an exception whose traceback a logger wrote at WARNING (or INFO, DEBUG)
  level was handled by the server: it is listed as ignored, never a failure;
- an exception that a request's error answer of the same process follows
  within BURST_LINES (its access line: "POST /v1/chat/completions" 500) was
  that request's (a window cut after the start), not during the server's own
  warm-up nor after a fatal line;
- a ready line printed before the port is bound (uvicorn's "Application
  startup complete.", TGI's "Connected") waits, without a health probe,
  ``settle`` seconds for the bind to fail; a bind that fails after it is a
  start that failed (phase http), not a crash while serving;
- a health 200 from a port held by a process outside the server's tree is not
  ready: it is someone else's server;
- a ready proven only by a request the server answered (no ready line in the
  log) has for evidence the line before it where the server said its HTTP
  server was up (an ``up`` rule), when there is one;
- ``stalled`` needs a stall window with no progress evidence: a new phase,
  progress that moves, log lines that are not heartbeats, probe evidence;
  its evidence (and an ``incomplete`` log's) is the last line, or for a start
  that ends waiting (a heartbeat: "Waiting for shard 0 to be ready...") or
  going down (a shutdown line) the last start-up line before that: where it got
  (a progress bar still at 0: the phase line that began it, unless the bar
  began its phase itself);
- a stop from outside (a ``stopped`` line: SIGTERM, SIGINT, Ctrl-C, exit code
  -15 or 143) is no failure: the errors that follow it are the stop's. After
  ready the outcome stays ``ready``, with a note of the line where it was
  stopped or shut down; before ready, with no failure before the
  stop, the run never got there (``incomplete``, live too: a deliberate stop
  is no hang), and the evidence is where it had got: the line before the stop (before the traceback
  a KeyboardInterrupt ends, and multiprocessing's "Process EngineCore:" above
  it), else the last line a rule read before it. A real
  crash after ready (an abort, a device assert, a dead engine: a ``fatal``
  line) is ``failed``, with a note of how long the server had been ready;
- a new run appended to the log (a ``start`` line after the run went
  somewhere) is judged on its own; but when a finished log's last run never
  got anywhere (``incomplete``: a restart policy's retry stopped from outside
  or cut off) after an earlier run failed, the verdict is that failure, with a
  note of the restart; runs that each failed the same way (the same cause and
  message: a restart loop) are one failure, the first run's.

Root cause (``_failed``): of the failure lines of the run (fatal lines,
exception lines, tracebacks cut short), in log order, the root is
1. the first that names a root cause: any cause but the ones below;
2. else the first ``missing_module``: a module that failed to import is often a
   fallback whose own ImportError (an undefined symbol, a missing library) is
   the cause, later in the chain; or the first exception a ``translated`` rule
   reads, which its handler raises again in its own words (requests'
   HTTPError, the hub client's GatedRepoError after it);
3. else the first error message: an exception naming no cause (not a lookup
   that missed, a KeyError, a StopIteration, when a handler caught it and
   raised another: that one says what failed; nor TorchScript's "operation failed
   in the TorchScript interpreter", whose message ends in the exception it
   wraps; nor one with no message at all, a bare "TimeoutError" a handler
   caught to raise "TimeoutError: RPC call to execute_model timed out."), or a line
   naming a consequence (an abort, ``segfault``: how C++ ends on an uncaught
   error, ``terminate called ...`` after a Python or NCCL error; a memory
   fault, "Segmentation fault", is a root of its own, unless lines naming a
   root cause come just before it (within BURST_LINES: ggml going on with a
   buffer it failed to allocate), the first of them then the root, or, for a
   script's shell reporting the crash ("bash: line 1: PID Segmentation fault
   ..."), just after it (a wrapper printing the log's tail under its report);
   a kernel op missing from its namespace, when a line above names that
   namespace's library failing to load: that line, root and evidence;
   ``worker_died``: a process reporting another's death, often after that
   process's own traceback; ``warmup_failed`` and SGLang's "Capture cuda
   graph failed": where start-up failed, not why; ``other``); a
   ``terminate called after throwing ...`` gives way to the ``what():`` line
   under it, the C++ exception's own message (so does a native stack printed
   before that line, within STACK_LINES: ggml's backtrace), and an abort or a
   kill to the first fatal line before it (ggml's "CUDA error: ..."); a fatal line or
   an exception no rule explains while the server's own warm-up request ran
   (after its HTTP server came up: SGLang's watchdog, its warm-up thread's
   traceback) is ``warmup_failed``; an exception no rule explains
   that a warm-up failure line follows is ``warmup_failed``, the exception
   the evidence;
4. else the first fatal line naming no cause ("Engine core initialization
   failed"), one that only heads a dump ("Shard complete standard error
   output:", marked ``consequence``) after the others, else the first
   traceback cut off before its exception (its evidence the error record
   logged right above its header, when there is one: logging's exception()
   writes the handler's message, then the traceback);
5. a log that ended (or a process that exited) with none of these, no ready
   line and no stop, on error lines that no rule reads as the server going
   on (the engine's last words: "Native API failed ...", "Floating point
   exception"): the first of them, ``other`` unless a cause rule reads it.
"First" makes the first copy of a message repeated by several ranks the
evidence (output glued together, the message twice, after a wrapped fragment of
itself or after a progress bar, gives way to the whole copy after it), and the
root of a chain of exceptions (``raise ... from``) its first; an exception
naming no cause whose message ends in another's (a wrapper quoting it, raised
in another worker's traceback or a window's), or whose message is another's
said again under another class (a caller re-raising an AssertionError as a
RuntimeError), gives way to it, the first, as does an exception with no message
raised while handling another with none; a fatal root naming a cause that
repeats a message logged just before it (within BURST_LINES) gives way to that
first copy. When the root names no root cause, the nearest cause line before it
(within CONTEXT_LINES, and after the ready line for a crash while serving), or
else the first after it, names the cause (an NCCL watchdog line that a
``terminate called`` follows; a missing module or library only when no other
cause is near, and never one logged as a warning or further than BURST_LINES
above the root unless the root names what failed to import); it is the evidence
too unless the root is an exception and the cause line comes before it, the
exception's own line then being the evidence (a cause line after an exception
is its output: the linker error a "ninja exited with status 1" leaves below
it). A fatal line that opens a traceback ("Initialization failed. warmup error:
Traceback ...") gives the evidence to that traceback's exception; an exception
raised by a kernel build ("Ninja build failed. Ninja output:") to the
compiler's first error line under it (within BURST_LINES); a native crash (a
segfault, glibc's abort) whose stack under it (within BURST_LINES) is in a
library a rule knows (``stack``: NCCL's own code) takes that rule's cause, its
own line still the evidence; a root that says only that a library failed ("NCCL
error: unhandled system error") to that library's own word where the call
failed, the first before it (a rule marked ``arose``: NCCL's WARN line), which
also names the cause of an exception no rule explains (a bare ``assert result
== 0`` on NCCL's return); so does a fatal root that names a cause (ROCm's
"Memory access fault by GPU" after the kernel's own device-side assertion), and
a log that ends on a library's own reports (last words an ``arose`` rule reads:
NVSHMEM's failed set-up) gives the evidence to its first report. A cause taken
from the lines before an error reaches back over lines of the same cause, but
not from an error to a warning the process went on after. A
cancelled task (asyncio's ``CancelledError``) is never a root: what cancelled
it (a stop, a shutdown, a client gone) is elsewhere, and a log ending on its
traceback ends on no failure; nor is a clean exit (``SystemExit: 0``, raised
as uvicorn shuts down after a watchdog's or a stop's signal).

Ignored lines (the verdict's ``benign``): the lines rules read as benign, and
the scary lines that did not decide the verdict: an exception start-up went on
after or logged as a warning (with its traceback's header line), an exception while serving unless
the server then failed, a line naming a cause (unless it names the failure's
own cause), the lines of a stop from outside and the errors that follow it,
and the errors of an earlier run in the same log. Copies of one message whose
prefixes differ only in numbers (timestamps, ranks) are listed once.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field, replace
from typing import Any

from ._outcome import Outcome
from .defaults import CONFIRM, GRACE
from .lines import PY_WARNING, parse
from .rules import PHASES, Rule
from .signals import Signal
from .tracebacks import BARE as _EXCEPTION_LINE
from .tracebacks import HEADER as _HEADER

# A traceback a logger wrote at these levels is one the server handled.
_HANDLED_LEVELS = ("WARNING", "INFO", "DEBUG")
_NO_MESSAGE = re.compile(r"(?:[\w.]+\.)?\w+$")  # an exception's class alone ("AssertionError")
# A task cancelled (asyncio's, or a future's): what cancelled it (a stop, a
# shutdown, a client gone) is elsewhere; the cancellation is never why a server failed.
_CANCELLED = re.compile(r"(?:asyncio\.(?:exceptions\.)?|concurrent\.futures\.(?:_base\.)?)?CancelledError\b")
# A process that exited cleanly (sys.exit(0), uvicorn's after a signal): what made it exit is elsewhere.
_CLEAN_EXIT = re.compile(r"SystemExit(?:: 0)?$")
# What a handler catches to raise an error that says what failed ("During
# handling of the above exception, another exception occurred"): a lookup that
# missed, or an exception with no message.
_CAUGHT_TO_EXPLAIN = re.compile(r"(?:[\w.]+\.)?(?:KeyError|StopIteration|IndexError|LookupError)\b"
                          r"|RuntimeError: There is no current event loop"
                          r"|(?:[\w.]+\.)?\w*(?:Error|Exception)$")  # one with no message ("TimeoutError")


def _same_failure(a: Verdict, b: Verdict) -> bool:
    """Whether two runs' failures are one: the same cause and root message,
    its numbers left out (what each run measured: free memory, sizes)."""
    if a.cause != b.cause or not a.evidence or not b.evidence:
        return False
    return _DIGITS.sub("0", parse(a.evidence["line"]).message) == _DIGITS.sub("0", parse(b.evidence["line"]).message)


def _first_of_loop(failures: list[Verdict]) -> Verdict:
    """The last of a log's runs' failures (oldest first); where the runs before
    it each failed the same way (a restart policy's loop), the first of them."""
    last, loop = failures[-1], 1
    while loop < len(failures) and _same_failure(failures[-loop - 1], last):
        loop += 1
    if loop == 1:
        return last
    first = failures[-loop]
    return replace(first, notes=first.notes + [
        f"the log holds {loop} runs (a restart policy's retries?) that failed the same way: the evidence is the "
        "first's"])


# Kinds of lines that say where a start had got.
_READ = ("phase", "progress", "heartbeat", "config", "benign", "cause")


def copy_key(line: str) -> str:
    """What copies of one message share: the message, and its prefix with the
    numbers (timestamps, ranks, pids) left out. The benign list keeps one."""
    message = parse(line).message
    return _DIGITS.sub("0", line[:len(line) - len(message)]) + message



def _tail(line: str, pattern: re.Pattern) -> str | None:
    """A message from where a rule matched it on (in the message, as rules
    read it, else in the whole line), numbers left out: what two copies of
    one message share ("ValueError: X" quoted by a wrapper), and two messages
    that only name one cause do not (gRPC's "Address already in use {...}"
    and Triton's "Socket '0.0.0.0:8001' already in use")."""
    for text in (parse(line).message, line):
        m = pattern.search(text)
        if m is not None:
            return _DIGITS.sub("0", text[m.start():]).strip()
    return None


# The end of a tqdm bar: "| 3/23 [00:11<00:55,  2.79s/it]"
_BAR_END = re.compile(r"(?:it/s|s/it)\](?:\[[^\]]*\]:?)*$")  # then the glued line's own "[rank15]:[E1224 ...]"


def _glued_in(message: str, line: str) -> bool:
    """Whether a line is output glued together around a message (in the
    messages, log prefixes off): the message twice or more (threads that printed
    at once), after a fragment of itself (a terminal wrapped a copy before it),
    or after a progress bar that ended no line. A longer line that holds it once
    with other words (its source location) is a copy, not glue."""
    message, line = message.strip(), line.strip()
    if not message or message == line or message not in line:
        return False
    before = line[:line.index(message)].strip()
    return line.count(message) > 1 or (bool(before) and before in message) or _BAR_END.search(before) is not None


def _handled_exception(s: Signal) -> bool:
    """An exception line a logger wrote at WARNING level or below: handled."""
    return s.level in _HANDLED_LEVELS and _EXCEPTION_LINE.match(s.message) is not None


# What a line says failed to import: "Failed to import from vllm._C with ImportError(...)",
# "No module named 'vllm._C'", "cannot import name 'x' from 'vllm._C'" (the module, not the name).
_IMPORTED = re.compile(r"\b(?:import(?: name '?\w+'? from| from)?|[Nn]o module named) '?(?P<module>[\w.]+)")


def _names_import(best: Signal, line: Signal) -> bool:
    """Whether a root names the module a line says failed to import (its last part)."""
    m = _IMPORTED.search(line.message)
    name = m.group("module").rsplit(".", 1)[-1] if m else ""
    return len(name) > 1 and re.search(rf"(?<!\w){re.escape(name)}\b", best.line) is not None


def _weak(s: Signal | None) -> bool:
    """Whether a signal names no root cause: no rule does, or a consequence
    (a rule that says how a process died, not why: see _failed). A rule whose
    cause is ``other`` names a root that no slug names (a CUDA kernel fault)."""
    rule = s.cause_rule if s is not None else None
    return rule is None or rule.consequence
MAX_BENIGN = 50
_DIGITS = re.compile(r"\d+")
# NCCL's watchdog reporting the error it caught on its stream (a CUDA fault that
# a worker's own exception reports where it arose).
# The port a bind failure names: uvicorn's "('0.0.0.0', 8000)", llama.cpp's "port: 8080" / "port=8080",
# Docker's "Bind for 0.0.0.0:9001", "Failed to bind to 0.0.0.0:8000".
_PORT_NAMED = re.compile(r"(?:', |\bport[:=]\s?|\b(?:for|to) [\w.\[\]:]*:)(?P<port>\d{2,5})\b")
_WATCHDOG_REPORT = re.compile(r"watchdog thread terminated with exception: ")
# A shell reporting that a command it ran died ("bash: line 1: 308206 Segmentation fault
# (core dumped) nohup ./llama-server ...", "./start.sh: line 9: 4242 Bus error ..."):
# printed once the process is gone, by a wrapper that may print its log's tail after it.
_SHELL_REPORT = re.compile(r"^(?:\S+: )?line \d+: +\d+ (?:Segmentation fault|Bus error)")
# Cause lines further than this before the failure do not explain it.
CONTEXT_LINES = 500
_TOKEN = re.compile(r"[\W_]+")
# The score of a fatal wrapper that quotes the cause ("Failed to initialize
# executor on rank 0: CUDA out of memory ..."): below the exception it quotes.
WRAPPER = 3.5
# A message this long that another exception ends in is what that one quotes.
_QUOTED_MIN = 20
# Lines naming one cause this close to each other tell one failure.
BURST_LINES = 20
# A bind error this close after a ready line printed before binding is that bind's
# (uvicorn's error, TGI's, and the lines of their shutdown around it).
BIND_LINES = 5
# How deep a native stack printed before the line saying how the process died may be.
STACK_LINES = 100

OTHER_EXPLANATION = "The server stopped on an error that no rule names; the evidence line is the root error."
OTHER_REMEDY = ("Read the traceback around the evidence line, and search the server's issues for its message; "
                "if firedup should know this failure, report the log (firedup diagnose --json FILE).")
WARMUP_EXPLANATION = ("The server's own warm-up run failed after its HTTP server came up, on an error no rule "
                      "names; the evidence line is that error.")
WARMUP_REMEDY = ("Read the error at the evidence line: the first real forward pass runs the kernels start-up skipped "
                 "(a backend, a custom all-reduce, a CUDA graph); try the server's switches that turn them off.")
INCOMPLETE_EXPLANATION = ("The log ends before the server said it was ready, with no failure in it; "
                          "the evidence line is where it had got.")
STOPPED_EXPLANATION = ("The server was stopped from outside (a signal, Ctrl-C) before it was ready; "
                       "the evidence line is where it had got.")
STOPPED_REMEDY = ("Find what stopped it: an orchestrator's probe or time limit shorter than the start (a Kubernetes "
                  "livenessProbe: add a startupProbe or a longer initialDelaySeconds; a scheduler's --time), "
                  "a supervisor restarting it, or a person. Then start it again and let it load.")
EMPTY_EXPLANATION = "The log is empty: there is nothing in it to read."
INCOMPLETE_REMEDY = ("If the server is still starting, follow it instead (firedup watch FILE); if it is gone, "
                     "look for how it ended outside the log: its exit code, dmesg (the kernel's OOM killer), "
                     "the scheduler's record.")
# A start that went silent: what it was doing, by the phase it had reached.
STALL_EXPLANATIONS = {
    "init": "before loading anything: an import, a lock (the Hugging Face or a compile cache's) or a download that "
            "prints no progress",
    "dist_init": "while its processes set up their communication (torch.distributed, NCCL): usually a rank that "
                 "never started, or an address or port the ranks cannot reach",
    "weights": "while loading weights: slow or stalled storage (a network filesystem, a download with no progress "
               "bar) or a hung loader",
    "kv_cache": "while profiling memory for the KV cache: a first forward pass that hangs or compiles",
    "compile": "while compiling (torch.compile, Triton autotuning): a first start compiles for long, later ones "
               "use the cache",
    "cuda_graphs": "while capturing CUDA graphs: a kernel that hangs or a collective waiting on another rank",
    "warmup": "during its own warm-up request, after its HTTP server came up",
    "engine_warmup": "while its engine warmed up (a first run through the model), before any HTTP server",
    "engine_up": "after its engine said it had finished starting: nothing followed (a script around an offline "
                 "engine that went quiet, or an HTTP front end that never started)",
    "http": "after its HTTP server started, before its ready line",
}
STALL_EXPLANATION = ("The server made no progress {doing}: for the stall window its log said nothing new (no new "
                     "line, progress or phase; the same line again is nothing new), nor did a process of it show work.")
STALL_REMEDIES = {
    "dist_init": "Check that every rank started, then run with NCCL_DEBUG=INFO (and NCCL_SOCKET_IFNAME set to the "
                 "interface the ranks share). ",
    "weights": "Check the storage's throughput (iostat; the network filesystem) and that the model is fully on "
               "disk. ",
    "compile": "A first start may just be slow: raise --stall for it, or warm the compile cache. ",
}
STALL_REMEDY = ("See what its processes are doing (py-spy dump --pid PID; firedup adds the stacks itself when py-spy "
                "is installed) and whether the GPU works (nvidia-smi); if it is only slow, raise --stall.")
TIMEOUT_EXPLANATION = ("The time limit (--timeout) ran out while the server was still starting, with progress in "
                       "the stall window; the evidence line is where it had got.")
QUEUED_TIMEOUT_EXPLANATION = ("The time limit (--timeout), which counts the wait in the queue, ran out while the "
                              "Slurm job was still queued (reason: {reason}): it never started, the server never ran.")
QUEUED_TIMEOUT_REMEDY = ("Raise --timeout to cover the wait for nodes too, or ask for what frees sooner (squeue "
                         "--start -j JOBID estimates when it starts; sinfo shows the partition's free nodes).")
TIMEOUT_REMEDY = ("Raise --timeout: a start that progresses is not stuck (firedup runs shows how long this "
                  "configuration took before).")
EXIT_EXPLANATION = "The server process exited before it was ready and left no error line that firedup recognises."
EXIT_REMEDY = "Read the last lines of the log; run the command by hand to see its output."
KILLED_EXPLANATION = ("The server process was killed by SIGKILL before it was ready, and its log names no error: "
                      "the kernel's OOM killer (or a container's memory limit), or a kill -9 from outside.")
KILLED_REMEDY = ("Look for the OOM killer: dmesg or journalctl -k ('Out of memory: Killed process'), a container's "
                 "OOMKilled state (docker inspect, kubectl describe pod); otherwise find what sent kill -9 (a "
                 "supervisor, a scheduler's limit, a person).")
SIGNALLED_EXPLANATION = "The server process was ended by {signal} before it was ready, and its log names no error."
SIGNAL_STOP_EXPLANATION = ("The server process was ended by {signal} before it was ready, and its log names no error: "
                           "a stop from outside (a person, a wrapper's time limit, a supervisor), not a failure; "
                           "the evidence line is where it had got.")
# The signals a stop from outside sends (Ctrl-C, kill, a closed terminal), as a process's
# return code (negative) or a shell's exit status for it (128 + n).
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
SIGNALLED_REMEDY = "Find what sent {signal}: a supervisor, a scheduler's limit, a person; then start it again."


# Signals that are a native crash of the process itself: its cause is a segfault's.
_CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE)


def _signal_number(code: int | None) -> int | None:
    """The signal that ended a process, from its return code (-n) or a shell's
    exit status for a child a signal ended (128 + n); None for a plain exit."""
    if code is not None and -64 < code < 0:
        return -code
    if code is not None and 128 < code < 128 + 64:
        return code - 128
    return None


def _exit_without_error(code: int | None) -> tuple[str, str, str]:
    """Why a process that exited before ready with no error line ended, as far
    as its exit code says (its own return code, -9, or a shell's status for a
    child a signal ended, 137): a signal is named, a native crash's is a
    segfault (-255: status unknown). Explanation, remedy, cause."""
    number = _signal_number(code)
    if number == signal.SIGKILL:
        return KILLED_EXPLANATION, KILLED_REMEDY, "other"
    if number is not None:
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        cause = "segfault" if number in _CRASH_SIGNALS else "other"
        return SIGNALLED_EXPLANATION.format(signal=name), SIGNALLED_REMEDY.format(signal=name), cause
    return EXIT_EXPLANATION, EXIT_REMEDY, "other"


@dataclass(frozen=True)
class Verdict:
    """What a log (and the process, the probes) say of a start-up. Never changed
    once made: what comes after the judge (a py-spy dump, the ledger's
    anomalies, changes and run id, a Slurm job's facts) makes a new record with
    ``dataclasses.replace``."""

    outcome: Outcome
    cause: str | None = None
    server: str | None = None
    phase: str | None = None
    evidence: dict[str, Any] | None = None
    explanation: str | None = None
    remedy: str | None = None
    progress: dict[str, Any] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    benign: list[dict[str, Any]] = field(default_factory=list)
    version: str | None = None
    elapsed: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    exit_code: int | None = None
    notes: list[str] = field(default_factory=list)  # what the verdict could not check
    stacks: str | None = None  # py-spy dump of a stalled server
    anomalies: list[str] = field(default_factory=list)  # phases far slower than usual
    changes: list[dict[str, Any]] = field(default_factory=list)  # since the last good run
    run_id: int | None = None  # in the ledger
    slurm: dict[str, Any] | None = None  # a Slurm job's facts: id, nodes, queue wait, the node to blame

    @property
    def code(self) -> int:
        return self.outcome.exit_code

    def to_dict(self, live: bool = False) -> dict[str, Any]:
        """``live``: the last of a watch's or launch's JSON events, which always
        carries its clock (elapsed, phases, exit code), also when it was
        decided before anything ran (a port already taken)."""
        d: dict[str, Any] = {
            "outcome": self.outcome, "cause": self.cause, "server": self.server,
            "phase": self.phase, "evidence": self.evidence, "explanation": self.explanation,
            "remedy": self.remedy, "progress": self.progress, "config": self.config,
            "benign": self.benign, "version": self.version,
        }
        if live or self.elapsed or self.exit_code is not None:
            d.update(elapsed=round(self.elapsed, 3), phases=self.phases, exit_code=self.exit_code)
        if self.stacks:
            d["stacks"] = self.stacks
        for key in ("notes", "anomalies", "changes", "run_id", "slurm"):
            if getattr(self, key):
                d[key] = getattr(self, key)
        return d


def _score(s: Signal) -> float:
    """How well a failure signal proves the failure and names its root cause
    (the tiers of the policy in this module's docstring)."""
    if s.cause == "missing_module" or (s.cause_rule is not None and s.cause_rule.translated):
        return 3
    if not _weak(s):
        # a wrapper that quotes the cause ("Failed to initialize executor on
        # rank 0: CUDA out of memory ...") comes after the error it quotes
        return WRAPPER if s.kind == "fatal" and s.rule is not None and s.rule.consequence else 4
    if s.kind == "exception" and (s.data.get("wraps") or (s.data.get("caught")
                                                          and _CAUGHT_TO_EXPLAIN.match(s.data.get("message", "")))):
        # what a handler caught, then raised the error that says what failed; a
        # wrapper whose message ends in the exception that says it (TorchScript's)
        return 1.5
    if s.kind == "exception" or s.cause:
        return 2
    if s.kind == "fatal":
        # a header naming no cause ("Shard complete standard error output:")
        # says where to look: a fatal line saying how it died comes first
        return 0.5 if s.rule is not None and s.rule.consequence else 1
    return 0  # a traceback cut off before its exception line


class Judge:
    def __init__(self, *, now: float = 0.0, stall: float | None = None, timeout: float | None = None,
                 grace: float = GRACE, server: str | None = None, confirm: float | None = None,
                 require_generate: bool = False, stall_for: dict[str, float] | None = None,
                 quiet: float | None = None, settle: float = 0.0):
        self.stall = stall
        # Log-only watching: silence after an exception that decides failed.
        self.quiet = quiet
        # How long a ready line printed before the bind waits without a probe.
        self.settle = settle
        # Per phase, a longer stall window where history says the phase is slow.
        self.stall_for = stall_for or {}
        self.timeout = timeout
        self.grace = grace
        # With a health probe, a ready line waits this long for the port to
        # answer (uvicorn says "startup complete" before it binds).
        self.confirm = confirm
        # --probe-generate: ready only once a one-token completion succeeded.
        self.require_generate = require_generate
        self.server = server
        self.started = now
        self._reset(now)

    def _reset(self, now: float) -> None:
        self.config: dict[str, Any] = {}  # a restart prints its own: an earlier run's settings are not its
        self.version: str | None = None
        self._version_by: str | None = None  # the family of the rule that read the version
        self.phase = "init"
        self.phase_started = now
        self.queued: Signal | None = None  # a Slurm job's latest word of its wait in the queue (its reason)
        self.phases: dict[str, float] = {}
        self.progress: dict[str, Any] | None = None
        self.last_evidence = now
        self.last_line: Signal | None = None
        self.last_said: Signal | None = None  # the last line that said something itself, not a dump's inside
        self.ready: Signal | None = None
        self.ready_at = 0.0
        self.answered = False
        self.generated = False
        self.fatal = False
        self.candidates: list[Signal] = []
        self.failure_phase: str | None = None
        self.pending_since: float | None = None
        self.causes: list[Signal] = []
        self.benign: list[dict[str, Any]] = []
        self._benign_seen: set[tuple[str, str]] = set()
        # Scary lines that may turn out not to decide the verdict, with why:
        # "handled" (an exception start-up went on after), "after_ready" (an
        # exception while serving), "request" (a request's traceback), "cause"
        # (a line naming a cause), "stopped".
        self.unused: list[tuple[Signal, str]] = []
        self.exit_code: int | None = None
        self.exit_origin = ""  # "slurm": the scheduler said the job ended, nothing of it is left running
        self.after_ready: list[Signal] = []
        self.last_line_at = now
        self._midway = False  # the last line read left a traceback before its exception line
        self._calm_lineno = 0  # the last line that showed the server going on
        self._stopping = False  # a shutdown line came after an exception
        # a window that begins as the server goes down: nothing of its start, no error before it
        self._begins_shutting_down = False
        self.went_down = False  # after ready, it shut itself down after a line naming a root cause
        self.ended: Signal | None = None  # after ready, the line saying its process finished or was stopped
        self._requests: list[int] = []  # the last lines that began a request's error
        self.first_request: Signal | None = None  # a request's error: the first line that shows it answered
        self._request_span = (0, 0)  # the last request's error: the line that began it, its exception line
        self._cancelled_span = (0, 0)  # the last cancelled task's traceback: the line before it, its exception line
        self.stopped: Signal | None = None  # stopped from outside (SIGTERM, Ctrl-C)
        self.last_read: Signal | None = None  # the last line a rule read before any stop
        self.last_startup: Signal | None = None  # the last phase, progress or config line
        self.before_shutdown: Signal | None = None  # the last start-up line before a start began going down
        self.shutdown_lineno = 0  # where it began going down (a bar it cut short shares its line)
        self.last_phase: Signal | None = None  # the last line that moved the phase
        self.last_setup: Signal | None = None  # the last phase or config line (no progress bar)
        self.up: Signal | None = None  # the first line saying the HTTP server is up, before ready
        self.engine_began: Signal | None = None  # the engine's own start (its configuration)
        self.frontend = False  # a line only an HTTP front end prints was read: not an offline engine
        self.owner: str | None = None  # who holds the probed port: tree, foreign, unknown, unchecked
        self.holder: str | None = None  # the process holding it, as the probe described it
        # A health answer with no process to tie the port to, and when: it stands once the log
        # has been quiet for the confirm window (heartbeats aside); a line after it proves it
        # another server's (this log's start was still under way), and then only the log decides.
        self._unchecked_answer: tuple[Signal, float] | None = None
        self._answers_disproved = False
        self.warming_up = False  # the server's own warm-up request runs, its HTTP server up
        self.last_words: Signal | None = None  # the error lines the log ends on, so far (Engine._last_words)
        # the failures of the runs just before this one in the same log (a restart loop), oldest first
        self.failed_runs: list[Verdict] = []
        self.restart: Signal | None = None  # the line that began the last run appended to the log

    # -- input ---------------------------------------------------------------

    def feed(self, s: Signal, now: float = 0.0) -> None:
        kind = s.kind
        if s.rule is not None and s.rule.start and (self.candidates or self.fatal or self.stopped or self.ended
                                                    or (self.ready and not s.rule.start_after_end)):
            # a new run appended to the same log: the earlier run's errors are listed as ignored
            failed = self._failed(now) if self.ready is None and (self.candidates or self.fatal) else None
            earlier = (self.benign, self._benign_seen, self.unused + [(c, "handled") for c in self.candidates])
            failed_runs = self.failed_runs + [failed] if failed else []  # a run that did not fail ends a loop
            self._reset(now)
            self.failed_runs, self.restart = failed_runs, s
            self.benign, self._benign_seen, self.unused = earlier
        if kind == "lines":
            if self.phase == "queued":
                self._enter("init", now)  # a job's log is written once it runs, seen by squeue or not
            self.last_words = None  # more lines came: the next silence reads the new last words
            self.last_line = s
            said = s.data.get("said")
            self.last_said = Signal("lines", *said) if said else s
            self.last_line_at = now
            self._midway = s.data.get("midway", False)
            if s.data.get("calm"):
                self._calm_lineno = s.lineno
            if s.data["n"] > s.data["heartbeats"] and not s.data.get("repeated"):
                self._evidence(now)
                if self._unchecked_answer is not None and self._unchecked_answer[1] < now:
                    self._unchecked_answer, self._answers_disproved = None, True
            return
        if kind == "stopping":
            self._stopping = self._stopping or bool(self.candidates)
            if self.ready is not None and s.rule is not None and s.rule.ends:
                self.ended = self.ended or s
            if self.ready is not None and self.stopped is None and not self.fatal and not self._request_since_ready() \
                    and any(_score(c) == 4 for c in self.after_ready + self._went_down_on()):
                self.went_down = True
            if self.ready is None and self.before_shutdown is None:
                self.before_shutdown, self.shutdown_lineno = self.last_startup, s.lineno
            if self.ready is None and self.last_startup is None and not self.candidates and not self.fatal:
                self._begins_shutting_down = True
            return
        if kind == "fatal" and self.ready is not None and s.rule is not None and s.rule.until_ready:
            kind = "benign"
            self._benign(s)  # a request's model load: the server goes on
            return
        if kind in ("fatal", "benign") and self.ready is not None and s.rule is not None and s.rule.stop_when_ready:
            kind = "stopped"
            self._benign(s)  # scary, and no failure
        if kind == "stopped":
            self.went_down = False  # the shutdown was the stop's
            if self.ready is not None:
                self.ended = self.ended or s
            if self.stopped is None and not self.fatal and not (self.ready is None and self.candidates):
                self.stopped = s
            self._unused(s, "stopped")
            return
        if self.stopped is not None and kind in ("fatal", "exception", "traceback") and s.origin != "slurm" \
                and not (kind == "fatal" and s.rule is not None and s.rule.after_stop and self.ready is None):
            self._unused(s, "stopped")
            return  # the stop's own noise: interrupted calls, children ending (not the scheduler's word)
        if self._begins_shutting_down and kind in ("fatal", "exception") and s.cause == "worker_died":
            self._unused(s, "stopped")
            return  # an engine gone as the shutdown the window begins in ended it (vLLM's EngineDeadError)
        if kind == "detect":
            if self.server is None or self.server == s.data.get("replaces"):
                self.server = s.data["server"]
                if self._version_by not in (None, "generic", self.server):
                    self.version = None  # the version of a library the server loads, not the server's
            return
        if kind in ("queued", "running", "requeued"):
            self._scheduled(kind, now)
            if kind == "queued":
                self.queued = s
            return
        if kind == "evidence":
            self._evidence(now)
            return
        if kind == "probe":
            self.owner = s.data.get("owner", self.owner)
            self.holder = s.data.get("holder", self.holder)
            if self.owner == "foreign":
                return  # someone else's server answered
            self.answered = self.answered or s.data["status"] is not None
            self.generated = self.generated or s.data.get("generate") == 200
            if s.data.get("ready") and self.ready is None and not self.fatal:
                if self.owner != "unchecked":
                    self._set_ready(s, now)
                elif not self._answers_disproved and self._unchecked_answer is None:
                    self._unchecked_answer = (s, now)
            return
        if kind == "exit":
            self.exit_code = s.data["code"]
            self.exit_origin = s.origin
            if self.ready is None and not self.candidates:
                self.failure_phase = self.phase
            return
        if s.rule is not None and kind in _READ and self.stopped is None:
            self.last_read = s
            if kind in ("phase", "progress", "config"):
                self.last_startup = s
                if self.before_shutdown is not None and s.lineno > self.shutdown_lineno:
                    self.before_shutdown = None  # start-up went on: it was not going down
            if kind == "phase":
                self.last_phase = s
            if kind in ("phase", "config"):
                self.last_setup = s
            self.engine_began = self.engine_began or (s if s.rule.engine_start else None)
            self.frontend = self.frontend or s.rule.frontend or s.rule.phase == "http" or \
                bool(s.rule.frontend_origin and s.rule.frontend_origin.search(s.origin))
        if s.rule is not None and s.rule.up and self.ready is None and self.up is None:
            self.up = s  # the first: vLLM's route list follows its "Starting vLLM API server"
        if s.rule is not None and s.rule.phase:
            # a bar's first reading has not moved: it does not say start-up went on past an exception
            self._enter(s.rule.phase, now, clear=kind != "progress", by=s.origin)
        if kind == "config":
            self.config.update((k, v) for k, v in s.data.items() if k != "version")
            if "version" in s.data:
                self.version, self._version_by = s.data["version"], s.rule.family
        elif kind == "benign":
            self._benign(s)
            if s.rule.served:
                self._served_after(s)
            if s.rule.request:
                self._requests = [*self._requests[-7:], s.lineno]
            if (s.rule.request or s.rule.served) and (self.first_request is None or s.rule.served
                                                      and not self.first_request.rule.served):
                self.first_request = s
        elif kind == "progress":
            self._progress(s, now)
        elif kind == "cause":
            self._unused(s, "cause")
            self.causes.append(s)
            if len(self.causes) > 64:
                # bounded, keeping the first (where a failure's output begins: the
                # compiler's first error of a build that then repeats them) and the latest
                del self.causes[16:48]
        elif kind == "ready":
            if not self.fatal and self.ready is None:
                self._set_ready(s, now)
        elif kind == "fatal":
            if s.rule is not None and s.rule.consequence and 0 < self._request_span[1] == s.lineno:
                self._engines_after_all(now)
            self._fail(s, now)
            self.fatal = True
        elif kind == "last_words":
            if not self._ends_a_request(s) and not self._ends_a_cancellation(s):
                self.last_words = s
        elif kind in ("exception", "traceback"):
            if s.data.get("level") in _HANDLED_LEVELS:
                self._unused(s, "handled")  # logged as a warning: the server handled it
            elif _CANCELLED.match(message := s.data.get("message", "")) or _CLEAN_EXIT.match(message):
                self._unused(s, "cancelled")
                self._cancelled_span = (s.data.get("traceback", s.lineno) - 1, s.lineno)
            elif (s.data.get("traceback", 0) - 1 in self._requests or s.data.get("request")) \
                    and not s.data.get("engine") and not (self.warming_up and self.ready is None):
                # a request's (after the line that began its error, or raised through
                # the HTTP server's handling of it): the server answered it with an
                # error and went on (not raised in the engine's own loop, which it
                # killed; the server's own warm-up request's says why a start failed)
                self._unused(s, "request")
                self._request_span = (s.data.get("traceback", s.lineno) - 1, s.lineno)  # a bare one: its line
            elif self.ready is not None and s.data.get("engine") and not self.fatal:
                self._fail(s, now)  # raised in the engine's own step: the engine died of it
                self.fatal = True
            elif self.ready is not None and not self.fatal:
                self.after_ready.append(s)
                del self.after_ready[:-16]
                self._unused(s, "after_ready")
            else:
                self._fail(s, now)

    def _scheduled(self, kind: str, now: float) -> None:
        """A scheduler's job: waiting in the queue (no stall clock), started, or
        put back in the queue for a new attempt (its log starts over)."""
        if kind == "requeued":
            self._reset(now)
        if kind != "running" and self.phase == "init" and self.last_line is None:
            self.phase = "queued"
        elif kind == "running" and self.phase == "queued":
            self._enter("init", now)
        elif kind == "running":
            # its log said it runs first: every log of the job starts its stall clock here all the same
            # (a silent rank is then named, not one whose first line came a moment earlier)
            self._evidence(now)

    def _ends_a_request(self, s: Signal) -> bool:
        """Whether a log's last words are a request's traceback's lines (its
        source lines, its exception, the message's own lines after it): the
        server answered that request with an error; the log ends on no failure."""
        start, end = self._request_span
        return 0 < end and start < s.lineno and not any(c.lineno > end for c in self.candidates + self.causes)

    def _ends_a_cancellation(self, s: Signal) -> bool:
        """Whether a log's last words are a cancelled task's or a clean exit's
        traceback (with the record that logged it: asyncio's "Exception in
        callback ..."): a shutdown's noise, no failure."""
        start, end = self._cancelled_span
        return 0 < end and start <= s.lineno and not any(c.lineno > end for c in self.candidates + self.causes)

    def _engines_after_all(self, now: float) -> None:
        """A request's traceback that ends in the engine reporting itself dead (V0's
        "AsyncEngineDeadError: Background loop has errored already", raised from
        what killed its loop): its exceptions are the engine's failure, not the
        request's."""
        start, end = self._request_span
        ours = [c for c, why in self.unused if why == "request" and start < c.lineno <= end]
        self.unused = [(c, why) for c, why in self.unused if not (why == "request" and start < c.lineno <= end)]
        for c in ours:
            if self.ready is not None:
                self.after_ready.append(c)
            else:
                self._fail(c, now)

    def _served_after(self, s: Signal) -> None:
        """A request the server took or answered with an error (an access line's
        4xx or 5xx, llama-server's slot taking it, a PD request aborted) just
        after an exception of the same process, before ready: the exception was
        that request's (a window cut after the server came up), the server goes
        on. Not during the server's own warm-up, nor after a fatal line."""
        if self.ready is not None or self.fatal or self.warming_up or self.phase == "warmup":
            return
        ours = [c for c in self.candidates if c.kind == "exception" and c.origin == s.origin
                and 0 < s.lineno - c.lineno <= BURST_LINES and not c.data.get("engine")]
        if ours and ours[-1] is self.candidates[-1]:
            for c in ours:
                self.candidates.remove(c)
                self._unused(c, "request")
            if not self.candidates:
                self.pending_since = None

    def _request_since_ready(self) -> bool:
        """Whether a request's error came after ready: a shutdown after it says nothing."""
        return self.ready is not None and bool(self._requests) and self._requests[-1] > self.ready.lineno

    def _went_down_on(self) -> list[Signal]:
        """The cause lines logged while serving (an allocator's OOM, no exception
        line of its own): what a server that then shut itself down died of."""
        if self.ready is None:
            return []
        return [c for c in self.causes if c.lineno > self.ready.lineno]

    def _set_ready(self, s: Signal, now: float) -> None:
        self.ready = s
        self.ready_at = now
        for c in self.candidates:
            self._unused(c, "handled")
        self.candidates.clear()
        self.pending_since = None
        self._stopping = False
        self._enter("serving", now)

    def _fail(self, s: Signal, now: float) -> None:
        if not self.candidates:
            self.failure_phase = self.phase
            self.pending_since = now
        self.candidates.append(s)

    def _evidence(self, now: float) -> None:
        self.last_evidence = now

    def _enter(self, phase: str, now: float, clear: bool = True, by: str | None = None) -> None:
        if phase == "warmup" and self.phase == "http":
            # SGLang (llama.cpp likewise) serves HTTP first, then runs its own warm-up request
            self.warming_up = True
        if PHASES.index(phase) <= PHASES.index(self.phase):
            return
        self.phases[self.phase] = round(self.phases.get(self.phase, 0.0) + now - self.phase_started, 3)
        self.phase = phase
        self.phase_started = now
        self.progress = None
        self._evidence(now)
        if clear:
            self._clear_pending(by)

    def _progress(self, s: Signal, now: float) -> None:
        new = {"desc": s.data.get("desc") or self.phase, "n": s.data["n"], "total": s.data["total"]}
        old = self.progress
        self.progress = new
        if old is None or (old["desc"], old["n"]) != (new["desc"], new["n"]):
            self._evidence(now)
            if old is not None:  # a first reading has not moved
                self._clear_pending(s.origin)

    def _clear_pending(self, by: str | None = None) -> None:
        # Start-up went on after the exception: it was handled. Not by another
        # process's start-up going on (a stage or rank the error did not stop).
        if self.candidates and not self.fatal:
            others = [c for c in self.candidates if by and c.origin and c.origin != by]
            for c in self.candidates:
                if c not in others:
                    self._unused(c, "handled")
            self.candidates[:] = others
            self.pending_since = self.pending_since if others else None
            self._stopping = self._stopping and bool(others)

    def _benign(self, s: Signal) -> None:
        self._list(self.benign, self._benign_seen, s.line, s.lineno, s.rule.id)

    @staticmethod
    def _list(into: list[dict[str, Any]], seen: set[tuple[str, str]], line: str, lineno: int, rule: str) -> None:
        """List a scary line as ignored, once: copies of a message whose
        prefixes differ only in numbers (timestamps, ranks, pids) are one line."""
        if len(into) >= MAX_BENIGN:
            return
        key = (rule, copy_key(line))
        if key not in seen:
            seen.add(key)
            into.append({"line": line, "lineno": lineno, "rule": rule})

    def _unused(self, s: Signal, why: str) -> None:
        if len(self.unused) < 4 * MAX_BENIGN:
            self.unused.append((s, why))

    def _ignored(self, outcome: str, cause: str | None, evidence: dict[str, Any] | None) -> list[dict[str, Any]]:
        """The benign lines, with the scary lines that did not decide the
        verdict: exceptions start-up went on after, exceptions while serving
        (unless it failed), lines naming a cause (unless they name the
        failure's), the lines of a stop from outside."""
        at = (evidence or {}).get("lineno")
        extra: list[tuple[int, str, str]] = []
        for s, why in self.unused:
            if s.lineno == at or (outcome == "failed" and (
                    why == "after_ready" or (why == "cause" and s.cause == cause))):
                continue
            if s.kind in ("exception", "traceback"):
                if s.data.get("header") and s.data.get("traceback") != at:
                    extra.append((s.data["traceback"], s.data["header"], "exception"))
                extra.append((s.lineno, s.line, "exception"))
            else:
                extra.append((s.lineno, s.line, (s.cause_rule or s.rule).id))
        if not extra and all(b["lineno"] != at for b in self.benign):
            return list(self.benign)
        out: list[dict[str, Any]] = []
        seen: set[tuple[str, str]] = set()
        listed = {at}  # a line read by two rules (a stop's, its exception's) is listed once
        rows = sorted([(b["lineno"], b["line"], b["rule"]) for b in self.benign] + extra, key=lambda r: r[0])
        for lineno, line, rule in rows:
            if lineno not in listed:
                listed.add(lineno)
                self._list(out, seen, line, lineno, rule)
        return out

    # -- decisions -----------------------------------------------------------

    def decide(self, now: float) -> Verdict | None:
        """The verdict as soon as it can be known, or None to keep watching."""
        if self.fatal:
            if self._unfinished(now):
                return None
            if self._cause_named() or now - self.last_line_at >= self.settle:
                return self._failure(now)
            return None  # the lines that name the cause usually follow within the burst
        # (an empty log has not begun: the start it will show may be a second away, as a server's imports are)
        if self._unchecked_answer is not None and self.last_line is not None \
                and now - self._unchecked_answer[1] >= (self.confirm or CONFIRM):
            self._set_ready(self._unchecked_answer[0], self._unchecked_answer[1])
            self._unchecked_answer = None
        if self.exit_code is not None:
            if self.ready is not None and (self.exit_code == 0 or self.stopped is not None):
                return None
            if self.stopped is not None and self.exit_origin != "slurm":
                return self._stalled(now, self._evidence_of(self._before_stop()))
            if self._ended_engine_up():
                # a script around an offline engine that exited cleanly once the engine was up
                return self._verdict("ready", now, self._evidence_of(self.last_setup))
            if (stop := self._stop_signal()) is not None:
                return self._verdict("incomplete", now, self._where_it_got(),
                                     explanation=SIGNAL_STOP_EXPLANATION.format(signal=stop), remedy=STOPPED_REMEDY)
            return self._failure(now)  # a job that ended before ready: stopped or not, nothing is left to inspect
        if self.ready is not None:
            if self.went_down:
                return self._failure(now)  # it shut itself down after a root cause, before its ready was answered
            # that run is over, and a process still writes the log (a restart appending to it): the next run decides
            over = self.ended is not None and self.quiet is None
            if not over and self._ready_confirmed(now):
                return self._verdict("ready", now, self._evidence_of(self._ready_line()))
        elif self.candidates and (now - self.pending_since >= self.grace or self._quiet_after_exception(now)) \
                and not self._unfinished(now):
            return self._failure(now)
        elif self._quiet_after_stop(now):
            return self._stalled(now, self._evidence_of(self._before_stop()))
        if self.timeout is not None and now - self.started >= self.timeout and self.phase == "queued":
            # (a requeued job may wait before the scheduler gave a reason)
            return self._verdict("timeout", now, self._evidence_of(self.queued) if self.queued else self._last_said(),
                                 explanation=QUEUED_TIMEOUT_EXPLANATION.format(
                                     reason=self.queued.data.get("reason") if self.queued else "not given yet"),
                                 remedy=QUEUED_TIMEOUT_REMEDY)
        if self.timeout is not None and now - self.started >= self.timeout:
            return self._verdict("timeout", now, self._last_said(), explanation=TIMEOUT_EXPLANATION,
                                 remedy=TIMEOUT_REMEDY)
        if self.phase == "queued":
            return None  # waiting for nodes is not a stall
        if self.stall is not None and now - self.last_evidence >= max(self.stall, self.stall_for.get(self.phase, 0)):
            if self.candidates:
                return self._failure(now)
            if self._ended_on_error():
                return self._failure(now)  # silent since the error lines it ends on
            if self.stopped is not None and self.ready is None:
                return self._stalled(now, self._evidence_of(self._before_stop()))
            if self._ended_up() and self.confirm is None:
                # silent once its API server started, and no probe to ask: up, as a finished log reads
                return self._verdict("ready", now, self._evidence_of(self.up))
            if self._only_requests() and self.confirm is None:
                return self._verdict("ready", now, self._evidence_of(self.first_request))  # it takes requests
            return self._stalled(now, self._where_it_got())
        return None

    def _failure(self, now: float) -> Verdict:
        """This run's failure; the first run's, when the runs before it in the
        same log failed the same way (a restart loop), watched live or finished."""
        return _first_of_loop(self.failed_runs + [self._failed(now)])

    def _stalled(self, now: float, evidence: dict[str, Any] | None) -> Verdict:
        """A run that went silent before ready (stalled), or was stopped from
        outside before it (incomplete); a restart after a failed run (as a
        finished log reads it) is that failure."""
        if self.failed_runs:
            return self._restarted_after(_first_of_loop(self.failed_runs))
        if self.stopped is not None:
            # a deliberate stop is no hang: the start was cut short, as a finished log reads it
            return self._verdict("incomplete", now, evidence, explanation=STOPPED_EXPLANATION, remedy=STOPPED_REMEDY)
        phase = self.phase
        if self.last_setup is not None and self.last_setup.rule is not None and self.last_setup.rule.engine_up \
                and self.last_startup is self.last_setup:
            phase = "engine_up"
        elif phase == "warmup" and not self.warming_up:
            phase = "engine_warmup"  # vLLM's engine warms up before its API server starts
        doing = STALL_EXPLANATIONS.get(phase, f"in phase {phase}")
        return self._verdict("stalled", now, evidence, explanation=STALL_EXPLANATION.format(doing=doing),
                             remedy=STALL_REMEDIES.get(self.phase, "") + STALL_REMEDY)

    def next_deadline(self) -> float | None:
        """The earliest clock reading at which ``decide`` may answer without new
        input, for a caller that sleeps until then (None: no near deadline)."""
        times = []
        if self._unchecked_answer is not None:
            times.append(self._unchecked_answer[1] + (self.confirm or CONFIRM))
        midway = self._midway and bool(self.fatal or self.candidates) and not self._cause_named()
        if midway:
            times.append(self.last_line_at + self.grace)
        elif self.fatal and not self._cause_named():
            times.append(self.last_line_at + self.settle)
        if self.ready is not None:
            if self.confirm is not None and not self.answered:
                times.append(self.ready_at + self.confirm)
            elif self.confirm is None and self._settles(self.ready):
                times.append(self.ready_at + self.settle)
        elif (self.candidates or self.stopped is not None) and self.quiet is not None and not midway:
            times.append(self.last_line_at + self.quiet)
        return min(times) if times else None

    def _cause_named(self) -> bool:
        # a wrapper quoting the cause waits, like a line naming none, for the error it quotes
        # (NCCL's watchdog reporting a CUDA fault, for the worker's own exception);
        # a native crash, for its stack (which may name the library it died in)
        return any(_score(c) >= 3 and _score(c) != WRAPPER and c.cause != "segfault"
                   and not _WATCHDOG_REPORT.search(c.line) for c in self.candidates or self.after_ready)

    def _settles(self, ready: Signal) -> bool:
        return ready.rule is not None and ready.rule.before_bind

    def _ready_confirmed(self, now: float) -> bool:
        if self.owner == "foreign" and self.ready.kind != "probe":
            return False  # the port answering is not this server's
        if self.confirm is not None:
            if not self.answered and now - self.ready_at < self.confirm:
                return False
        elif self._settles(self.ready) and now - self.ready_at < self.settle:
            return False
        return self.generated or not self.require_generate

    def _unfinished(self, now: float) -> bool:
        """Whether the log stopped inside a traceback, before its exception
        line, less than ``grace`` ago, and no line read names the cause yet: a
        writer's buffer or a relay holds the rest (the exception names the
        cause, a frame does not)."""
        return self._midway and now - self.last_line_at < self.grace and not self._cause_named()

    def _quiet_after_exception(self, now: float) -> bool:
        if self.quiet is None or now - self.last_line_at < self.quiet:
            return False
        went_on = self._calm_lineno > max(c.lineno for c in self.candidates) and not self._stopping
        return not went_on

    def _quiet_after_stop(self, now: float) -> bool:
        # with no process to exit, a start stopped from outside says all it will once its shutdown is written
        return (self.stopped is not None and not self.candidates and self.quiet is not None
                and now - self.last_line_at >= self.quiet)

    def finish(self, now: float = 0.0) -> Verdict:
        """The verdict on a finished log: no more lines will come."""
        exited = self.exit_code not in (None, 0) and self.ready is None and self.stopped is None
        if exited and (stop := self._stop_signal()) is not None and not self._ended_on_error() and not self.went_down:
            return self._verdict("incomplete", now, self._where_it_got(),
                                 explanation=SIGNAL_STOP_EXPLANATION.format(signal=stop), remedy=STOPPED_REMEDY)
        if self.fatal or self.candidates or self._ended_on_error() or exited or self.went_down:
            return self._failure(now)
        if self.ready is not None:
            return self._verdict("ready", now, self._evidence_of(self._ready_line()))
        if self._only_requests():
            return self._verdict("ready", now, self._evidence_of(self.first_request))
        if self._ended_up() or self._ended_warming_up():
            return self._verdict("ready", now, self._evidence_of(self.up))
        if self._ended_engine_up():
            return self._verdict("ready", now, self._evidence_of(self.last_setup))
        if self.failed_runs:
            return self._restarted_after(_first_of_loop(self.failed_runs))
        if self.stopped is not None:
            return self._verdict("incomplete", now, self._evidence_of(self._before_stop()),
                                 explanation=STOPPED_EXPLANATION, remedy=STOPPED_REMEDY)
        where = self._where_it_got()
        return self._verdict("incomplete", now, where, explanation=INCOMPLETE_EXPLANATION if where else
                             EMPTY_EXPLANATION, remedy=INCOMPLETE_REMEDY)

    def _restarted_after(self, failure: Verdict) -> Verdict:
        """An earlier run's failure, for a log whose last run (a restart) never
        got anywhere: the restart says nothing the failure does not."""
        assert self.restart is not None  # set with the failed runs
        how = "was stopped" if self.stopped is not None else "got nowhere"
        return replace(failure, notes=failure.notes + [
            f"the server was started again at line {self.restart.lineno} (a restart policy's retry?) and the "
            f"restart {how}: the verdict is the earlier run's failure"])

    def _only_requests(self) -> bool:
        """Whether a finished log with no ready line goes on, after whatever of its
        start it shows, with requests the server answered with errors (their
        tracebacks the requests'): a server that takes requests is up. Not where its
        HTTP server was read coming up before ready, nor during its own warm-up:
        SGLang answers HTTP while it warms up, and its warm-up request may fail on
        its API before its ready line."""
        return self.first_request is not None and self.up is None and not self.warming_up \
            and self.phase != "warmup" and self.stopped is None

    def _ended_up(self) -> bool:
        """Whether a log with no ready line ends with its HTTP server starting
        after the engine was up (vLLM's "Starting vLLM API server" and its routes)
        and nothing after: a logging config that sends uvicorn's own lines to
        another file leaves exactly this (watched live with no probe: silent
        after it for the stall window). Not for a process that exited, nor on
        uvicorn's own word of a log whose family is unknown (SGLang's warm-up
        comes after it)."""
        return self.ready is None and self.stopped is None and self.exit_code is None \
            and self.up is not None and self.up.rule is not None and self.up.rule.family != "generic" \
            and not self.up.rule.warmup_follows and self.phase == "http" \
            and self.last_startup is not None and self.last_startup.lineno >= self.up.lineno \
            and self.last_startup.rule is not None and self.last_startup.rule.phase == "http"

    def _ended_warming_up(self) -> bool:
        """Whether a finished log of a server that warms itself up after its
        HTTP server is up (SGLang) ends after that (or, in a window that begins
        after it, after a request it answered), before its ready line, with
        nothing failing and nothing going down: a window cut there shows a
        server that was up; not one that ends on a process waiting on another
        (ranks waiting on a JIT build's lock). Only for a finished log: watched
        live, silence there is a warm-up that hangs."""
        return self.ready is None and self.stopped is None and self.exit_code is None \
            and self.up is not None and self.up.rule is not None and self.up.rule.warmup_follows \
            and self.phase in ("warmup", "http") and self.before_shutdown is None and not self._ends_waiting()

    def _ends_waiting(self) -> bool:
        """Whether the last line a rule read says a process waits on another (a
        JIT build's lock another rank holds)."""
        return self.last_read is not None and self.last_read.kind == "heartbeat" \
            and self.last_read.rule is not None and self.last_read.rule.waiting

    def _stop_signal(self) -> str | None:
        """The signal a process that ended before ready with no failure in its log
        was stopped by, when it is one a stop from outside sends (not SIGKILL: the
        kernel's OOM killer sends that; not a scheduler's end, which says why)."""
        if self.ready is not None or self.fatal or self.candidates or self.exit_origin == "slurm":
            return None
        number = _signal_number(self.exit_code)
        return signal.Signals(number).name if number in _STOP_SIGNALS else None

    def _ended_engine_up(self) -> bool:
        """Whether a finished log is an offline engine's (vllm.LLM, sgl.Engine in
        a notebook: it shows the engine's own start and no line of an HTTP front
        end) that ends on the engine's word that it finished starting, with
        nothing failing and nothing after it: its saved output stops where the
        engine was up, before any prompt. Not a window that begins after the
        engine's start (a wrapper's front end may be what hangs there), and only
        for a finished log or a script that exited 0: watched live, silence
        there is a start that hangs."""
        return self.ready is None and self.stopped is None and self.exit_code in (None, 0) and self.up is None \
            and not self.frontend and self.engine_began is not None and self.before_shutdown is None \
            and self.last_setup is not None and self.last_setup.rule is not None and self.last_setup.rule.engine_up \
            and self.last_startup is self.last_setup and self.last_setup.lineno > self.engine_began.lineno

    def _ready_line(self) -> Signal:
        """The ready verdict's evidence: the ready line, or for a ready proven
        only by a request the server answered (a log whose family's ready line
        is missing: a logging config that drops it), the line before it where
        the server said its HTTP server was up, when there is one."""
        assert self.ready is not None  # called only for a ready verdict
        if self.ready.rule is not None and self.ready.rule.served and self.up is not None \
                and self.up.rule is not None and self.up.rule.phase == "http":
            return self.up  # not a request answered in the warm-up (an up line too: SGLang's)
        if self.ready.rule is not None and self.ready.rule.offline and self.last_setup is not None:
            return self.last_setup  # not its own batch's bar
        return self.ready

    def _ended_on_error(self) -> bool:
        """Whether, with no failure line, the log ends on error lines no rule
        reads as the server going on (the engine's last words), before any
        ready line or stop from outside."""
        return self.last_words is not None and self.ready is None and self.stopped is None and not self.candidates

    def _before_stop(self) -> Signal:
        """Where a start stopped from outside had got: the line before the
        stop (before the traceback it ends: the stop's own frames say nothing
        of it), else the last line a rule read before it."""
        assert self.stopped is not None  # called only for a start that was stopped
        before = self.stopped.data.get("before")
        if before is not None:
            return Signal("lines", before[0], before[1])
        return self.last_read or self.stopped

    def _failed(self, now: float) -> Verdict:
        candidates = self.candidates or self.after_ready or self._went_down_on()
        if not candidates and self.last_words is not None and self._ended_on_error():
            candidates = [self.last_words]  # it died of the error lines it ends on
        if self.ready is not None and self.fatal:
            # a crash while serving: the errors logged just before its fatal line are its own
            first = self.candidates[0].lineno
            candidates = [s for s in self.after_ready if first - CONTEXT_LINES <= s.lineno < first] + candidates
        if not candidates:
            explanation, remedy, cause = _exit_without_error(self.exit_code)
            if self.stopped is not None:  # a job that ended after a stop from outside
                explanation, remedy, cause = STOPPED_EXPLANATION, STOPPED_REMEDY, "other"
            return self._verdict("failed", now, self._last_said(), cause=cause, explanation=explanation,
                                 remedy=remedy)
        # in log order: a worker's traceback reaches the judge when its block
        # closes, after lines other processes wrote below it
        candidates = sorted(candidates, key=lambda s: s.lineno)
        best = max(candidates, key=_score)  # max keeps the first of equals: the root
        best = self._unglued(self._thrown(self._quoted(self._bare(best, candidates), candidates), candidates),
                             candidates)
        if _WATCHDOG_REPORT.search(best.line):
            # NCCL's watchdog reports what a worker's own exception raised where it arose
            best = next((c for c in candidates if c.lineno > best.lineno and c.kind == "exception"
                         and c.cause == best.cause and not _WATCHDOG_REPORT.search(c.line)), best)
        if best.cause == "segfault" and best.kind == "fatal":
            best = self._fault_after(best)
        rule = best.cause_rule
        if best.cause == "segfault" and best.kind == "fatal":
            rule = self._died_in(best) or rule
        evidence = best
        if _weak(best):
            context = self._context_cause(best)
            context = self._unglued(context, self.causes) if context is not None else None
            if context is not None and (_score(best) <= 1 or not _weak(context)):
                rule = context.cause_rule
                if _score(best) <= 1 or best.kind != "exception" or context.lineno > best.lineno \
                        or self._library_of(best) \
                        or (rule is not None and rule.arose and context.level not in _HANDLED_LEVELS):
                    evidence = context
            elif rule is None and best.kind == "exception":
                # an exception no rule explains, then a line saying the warm-up
                # failed ("Initialization failed. warmup error"): where the start
                # failed says more than nothing (how a process died does not)
                rule = next((c.cause_rule for c in candidates if c.lineno > best.lineno
                             and c.cause == "warmup_failed"), None)
        elif best.kind in ("fatal", "last_words") or best.data.get("what"):
            evidence = self._first_copy(best)
            arose = best.cause_rule is not None and best.cause_rule.arose  # last words a library's own report
            if best.kind == "last_words" and not arose:
                evidence = self._burst_start(evidence)
            elif best.kind in ("fatal", "last_words") and best.cause_rule is not None:
                evidence = self._where_it_arose(evidence, candidates)
        elif best.kind in ("exception", "fatal") and best.cause_rule is not None:
            evidence = self._where_it_arose(best, candidates)
        if evidence is best and best.kind == "exception" and best.cause == "compile_error":
            # "Ninja build failed. Ninja output:": the compiler's own error below says what
            # failed (its output, not another exception of the chain: "Error building extension")
            evidence = next((c for c in self.causes if c.cause == "compile_error"
                             and 0 < c.lineno - best.lineno <= BURST_LINES
                             and not _EXCEPTION_LINE.match(c.message)), best)
        if evidence is best and best.kind == "fatal" and _HEADER.search(best.line):
            # "Initialization failed. warmup error: Traceback ...": its exception says what failed
            evidence = next((c for c in candidates if c.kind == "exception"
                             and c.data.get("traceback") == best.lineno), best)
        if (rule is None or rule.cause is None) and self.ready is None and self.warming_up \
                and best.kind in ("fatal", "exception"):
            # the HTTP server was up and the server's own warm-up request was
            # running when a fatal line (a watchdog, a kill) or an exception no
            # rule explains ended it: where it failed is all the log says
            return self._verdict("failed", now, self._evidence_of(evidence), cause="warmup_failed",
                                 explanation=WARMUP_EXPLANATION, remedy=WARMUP_REMEDY)
        if rule is None or rule.cause is None:
            # a wrapper's own words, when it has them ("See root cause above", in a log cut after it)
            said = next((c.rule for c in [evidence, *candidates] if c.lineno == evidence.lineno
                         and c.rule is not None and c.rule.explanation), None)
            return self._verdict("failed", now, self._evidence_of(evidence), cause="other",
                                 explanation=said.explanation if said else OTHER_EXPLANATION,
                                 remedy=said.remedy if said else OTHER_REMEDY)
        remedy = dict(rule.remedies).get(self.server or "", rule.remedy)
        if rule.cause == "port_in_use" and self.owner == "foreign" and self.holder:
            # the health probe found who holds the server's port: name it, not how to find it
            remedy = f"Stop {self.holder}, which holds the server's port, or start the server on another --port."
        elif rule.cause == "port_in_use" and (port := _PORT_NAMED.search(evidence.line)):
            remedy = remedy.replace(":PORT", f":{port.group('port')}")  # the command to find its holder, ready to run
        return self._verdict("failed", now, self._evidence_of(evidence), cause=rule.cause,
                             explanation=rule.explanation, remedy=remedy)

    @staticmethod
    def _quoted(best: Signal, candidates: list[Signal]) -> Signal:
        """An exception naming no cause whose message ends in another's (a wrapper
        raised from it, quoting it: vLLM's "Error in model execution (input dumped
        to ...): <the error>"), printed by another worker or before it, or
        that says the same under another class (a caller re-raising an
        AssertionError as a RuntimeError): the exception it quotes, the first
        of them."""
        message = best.data.get("message", "")
        if best.kind != "exception" or not _weak(best):
            return best
        mine = message.partition(": ")[2]
        for c in candidates:
            said = c.data.get("message", "").partition(": ")[2] if c.kind == "exception" else ""
            if len(said) < _QUOTED_MIN:
                continue
            if c.lineno < best.lineno if said == mine else \
                    message.endswith(": " + said) and len(message) > len(c.data["message"]):
                return c
        return best

    @staticmethod
    def _bare(best: Signal, candidates: list[Signal]) -> Signal:
        """An exception with no message raised while handling another with none
        (a caller re-raising an empty AssertionError as an empty RuntimeError)
        says no more than it: the one it handled, the root of the chain."""
        if best.kind != "exception" or not _weak(best) or not _NO_MESSAGE.match(best.data.get("message", "")):
            return best
        return next((c for c in reversed(candidates) if c.lineno < best.lineno and c.kind == "exception"
                     and c.data.get("caught") and _weak(c) and _NO_MESSAGE.match(c.data.get("message", ""))), best)

    @staticmethod
    def _thrown(best: Signal, candidates: list[Signal]) -> Signal:
        """For a line saying how a process died ("terminate called after
        throwing an instance of 'std::runtime_error'", "Aborted (core
        dumped)", "Killed"), the error it died of: the exception's own message
        printed right under it ("what():  ..."), else the first fatal line
        before it ("CUDA error: peer access has not been enabled", SGLang's
        "Watchdog timeout"); likewise for an exception saying a child died
        (an EOFError from its closed pipe) after the child's own fatal line."""
        says_how = best.rule is not None and best.rule.consequence
        if not says_how and best.cause != "worker_died":
            return best
        what = next((c for c in candidates if c.data.get("what") and 0 < c.lineno - best.lineno <= 2), None)
        if what is None and says_how:
            # a native stack printed before the line saying how it died (ggml's handler prints
            # its backtrace, then "terminate called ..."): the exception's message under that line
            what = next((c for c in candidates if c.data.get("what") and 0 < c.lineno - best.lineno <= STACK_LINES
                         and any(t.kind == "fatal" and t.rule is not None and t.rule.consequence
                                 and 0 < c.lineno - t.lineno <= 2 for t in candidates)), None)
        if what is not None:
            return what
        fatal = next((c for c in candidates if c.kind == "fatal" and 0 < best.lineno - c.lineno <= CONTEXT_LINES
                      and c.rule is not None and not c.rule.consequence), None)
        if fatal is not None:
            return fatal
        # an engine reporting itself dead, raised from what killed it: the last
        # exception of its chain before it that names no consequence of its own
        chain = best.data.get("traceback")
        return next((c for c in reversed(candidates) if chain is not None and c.data.get("traceback") == chain
                     and c.data.get("caught") and c.lineno < best.lineno
                     and (c.cause_rule is None or not c.cause_rule.consequence)), best)

    def _where_it_arose(self, best: Signal, candidates: list[Signal]) -> Signal:
        """A root that says only that a library failed ("NCCL error: unhandled
        system error"), or that repeats what such a line said, gives the
        evidence to that library's own word where the call failed, the first of
        them before it (within CONTEXT_LINES, after the ready line for a crash
        while serving, not one logged as a warning unless the root is an exception
        with no message). Else, where several
        processes failed of it (a worker on another node, then the driver), the
        library's word printed just before another process's copy of the same
        message: the processes failed at one call, and only that line says why."""
        since = max(best.lineno - CONTEXT_LINES, self.ready.lineno if self.ready is not None else 0)
        # an exception with no message (its class alone) says nothing: where its cause arose
        # speaks for it even logged at INFO (vLLM's "No platform detected", then a bare NotImplementedError)
        bare = best.kind == "exception" and bool(_NO_MESSAGE.match(best.data.get("message", "")))
        arose = [c for c in self.causes if since <= c.lineno and c.cause == best.cause
                 and c.cause_rule is not None and c.cause_rule.arose and not _WATCHDOG_REPORT.search(c.line)
                 and (bare or c.level not in _HANDLED_LEVELS)]
        before = next((c for c in arose if c.lineno < best.lineno), None)
        rule = best.cause_rule
        if before is not None or rule is None or rule.arose:
            return before or best
        said = _tail(best.line, rule.pattern)
        return next((c for c in arose if c.lineno > best.lineno and any(
            0 < o.lineno - c.lineno <= CONTEXT_LINES and o.kind == best.kind and _tail(o.line, rule.pattern) == said
            for o in candidates)), best)

    def _fault_after(self, fault: Signal) -> Signal:
        """A memory fault right after lines naming a root cause (an allocation
        that failed, a load that failed: ggml going on with a null buffer) is
        their consequence: the first of those lines, within BURST_LINES. A
        shell's report of the crash says it after the fact, so a wrapper that
        prints the process's last lines under it puts the cause after it: the
        first line naming one within BURST_LINES below, when none comes before.
        A crash while serving takes no cause from the start-up before the ready
        line (an allocation llama.cpp retried and got)."""
        since = self.ready.lineno if self.ready is not None and self.ready.lineno < fault.lineno else 0
        burst = [c for c in self.causes if 0 < fault.lineno - c.lineno <= BURST_LINES and c.lineno > since
                 and not _weak(c)]
        if not burst and _SHELL_REPORT.search(fault.message or fault.line):
            burst = [c for c in self.causes if 0 < c.lineno - fault.lineno <= BURST_LINES and not _weak(c)]
        return burst[0] if burst else fault

    def _died_in(self, fault: Signal) -> Rule | None:
        """The library a native crash died in, when its stack (printed under
        it, within BURST_LINES: a backtrace, Python's faulthandler) names one
        a rule knows (NCCL's own code): the crash's cause."""
        frame = next((c for c in self.causes if 0 < c.lineno - fault.lineno <= BURST_LINES
                      and c.cause_rule is not None and c.cause_rule.stack), None)
        return frame.cause_rule if frame is not None else None

    def _burst_start(self, words: Signal) -> Signal:
        """The first line its cause rule read in the burst of error lines a log
        ends on, where the last words found reach back only a few lines: a
        runtime's indented trace ("rtGetDeviceCount execution failed", then
        "get device count failed", then eight more) says it first."""
        found = words
        for c in reversed(self.causes):
            if c.lineno >= found.lineno:
                continue
            if c.lineno <= self._calm_lineno or found.lineno - c.lineno > BURST_LINES:
                break
            if c.cause_rule is words.cause_rule:
                found = c
        return found

    def _first_copy(self, best: Signal) -> Signal:
        """The first copy of the message a fatal root (the what() of a C++
        exception, the error lines a log ends on) repeats, among the lines just before it (each within
        BURST_LINES of the next): Triton's "Failed to create instance:
        ValueError: X" after the stub's own "Failed to initialize Python stub:
        ValueError: X"; an abort's what() quoting NCCL's watchdog line."""
        rule = best.cause_rule
        tail = _tail(best.line, rule.pattern)
        if tail is None:
            return best
        found = best
        for c in reversed(self.causes):
            if c.lineno >= found.lineno:
                continue
            # NCCL's watchdog reports what it caught after its dump (a minute later,
            # the failed collective's stack between): its own line said it first
            reach = CONTEXT_LINES if _WATCHDOG_REPORT.search(found.line) else BURST_LINES
            if found.lineno - c.lineno > reach:
                break
            if c.cause_rule is rule and _tail(c.line, rule.pattern) == tail:
                found = c
        return found

    @staticmethod
    def _unglued(best: Signal, candidates: list[Signal]) -> Signal:
        """A fatal line that is output glued together around a later line the
        same rule reads (within BURST_LINES: ggml's assert from threads that
        printed at once, a progress bar with no line end before it): that later
        line, the message whole, is the root."""
        # the glued line as written: the engine read its message off the glue
        return next((c for c in candidates if 0 < c.lineno - best.lineno <= BURST_LINES
                     and c.rule is best.rule and _glued_in(c.message, parse(best.line).message)), best)

    @staticmethod
    def _library_of(best: Signal) -> set[str]:
        """The library a consequence names (a rule's ``library`` group: the op
        namespace a kernel is missing from), as its name's words: only a line
        naming it explains it ("_C_ascend" by "vllm_ascend_C: libvllm_ascend_kernels.so")."""
        rule = best.cause_rule
        if rule is None or not rule.consequence or "library" not in rule.pattern.groupindex:
            return set()
        m = rule.pattern.search(best.line)
        return set(_TOKEN.split(m.group("library"))) - {""} if m else set()

    def _context_cause(self, best: Signal) -> Signal | None:
        """The cause line nearest before the root (else the first after it),
        one naming a root cause first; of lines naming that cause just before
        it, the first (an NCCL watchdog, then the abort that quotes it), not
        reaching back from an error to a warning."""
        # a line the start-up went on after did not stop it: it explains no crash while serving
        since = max(best.lineno - CONTEXT_LINES, self.ready.lineno if self.ready is not None else 0)
        # an exception the server logged as a warning and went on after explains nothing
        # (an optional import, a probe); nor does a module or library warned about (an optional
        # extension: vllm._C on an NPU host) or far above the failure, unless the root names what
        # failed to import ("Failed to import from vllm._core_C", then "class '_core_C.ScalarType'");
        # a consequence naming a library is explained only by a line naming it
        library = self._library_of(best)
        # a frame of a crash's stack says where a native crash died, not what an error line meant (_died_in)
        causes = [c for c in self.causes
                  if not _handled_exception(c) and not (c.cause_rule is not None and c.cause_rule.stack)
                  and (library <= set(_TOKEN.split(c.line)) if library else
                       not (c.cause in ("missing_module", "missing_shared_lib") and not _names_import(best, c)
                            and (c.level in _HANDLED_LEVELS or PY_WARNING.search(c.line)
                                 or best.lineno - c.lineno > BURST_LINES)))]
        before = [c for c in causes if since <= c.lineno <= best.lineno]
        after = [c for c in causes if c.lineno > best.lineno]
        near = [*reversed(before), *after]
        strong = [c for c in near if not _weak(c)]
        # a missing module is often a fallback's: another cause comes first (see _score)
        found = next((c for c in strong if c.cause != "missing_module"), strong[0] if strong else
                     near[0] if near else None)
        if found is not None and found in before:
            for c in reversed(before[:before.index(found)]):
                # a warning the process went on after is not where an error it logged began
                if c.cause != found.cause or (c.level in _HANDLED_LEVELS and found.level not in _HANDLED_LEVELS):
                    break
                found = c
        return found

    def _where_it_got(self) -> dict[str, Any] | None:
        """A start that never got there: its last line, or when it ends on a
        server waiting ("Waiting for shard 0 to be ready...", a heartbeat and
        what follows it), the last start-up line before the waiting began, but
        where a process says what it waits on (a build lock), that line; when
        it ends going down (a shutdown line), the last start-up line before that;
        a progress bar still at 0 gives way to the phase line that began it."""
        if self.before_shutdown is not None:
            return self._evidence_of(self._got_to(self.before_shutdown))
        if self._ends_waiting():
            return self._evidence_of(self.last_read)
        if self.last_read is not None and self.last_read.kind == "heartbeat" and self.last_startup is not None:
            return self._evidence_of(self._got_to(self.last_startup))
        if self.last_startup is not None and self.last_line is not None \
                and self.last_line.lineno == self.last_startup.lineno:
            return self._evidence_of(self._got_to(self.last_startup))
        return self._last_said()

    def _got_to(self, s: Signal) -> Signal:
        """A progress bar that never moved (0 of N) says no more than the
        phase line that began it ("Capture cuda graph begin"): the last phase
        line, when the bar belongs to no phase of its own ("  0%|   | 0/58") or
        to that line's; a bar that began a phase itself is its own evidence."""
        if s.kind == "progress" and not s.data.get("n") and self.last_phase is not None:
            own = s.rule.phase if s.rule is not None else None
            if own is None or self.last_phase.rule is None or own == self.last_phase.rule.phase:
                return self.last_phase
        return s

    def _last_said(self) -> dict[str, Any] | None:
        return self._evidence_of(self.last_said) if self.last_said else None

    @staticmethod
    def _evidence_of(s: Signal) -> dict[str, Any]:
        return {"line": s.line, "lineno": s.lineno}

    def _verdict(self, outcome: str, now: float, evidence: dict[str, Any] | None, *,
                 cause: str | None = None, explanation: str | None = None,
                 remedy: str | None = None) -> Verdict:
        phases = dict(self.phases)
        phases[self.phase] = round(phases.get(self.phase, 0.0) + now - self.phase_started, 3)
        phase = self.phase
        unbound = outcome == "failed" and self._unbound(cause, evidence)
        if outcome == "failed":
            phase = "http" if unbound else "serving" if self.ready is not None else (self.failure_phase or self.phase)
        return Verdict(
            outcome=Outcome(outcome), cause=cause, server=self.server, phase=phase, evidence=evidence,
            explanation=explanation, remedy=remedy, progress=self.progress, config=dict(self.config),
            benign=self._ignored(outcome, cause, evidence), version=self.version, elapsed=now - self.started,
            phases=phases, exit_code=self.exit_code, notes=self._notes(outcome, now, evidence, unbound),
        )

    def _unbound(self, cause: str | None, evidence: dict[str, Any] | None) -> bool:
        """Whether a failure is the port bind that a ready line printed before
        binding (uvicorn's "Application startup complete.", TGI's "Connected")
        still waited for: a start that failed, not a crash while serving. Only
        right after that line, with no request taken in between (a port another
        part takes later, a weight-sync group's store, is a crash while serving)."""
        if cause != "port_in_use" or self.ready is None or not self._settles(self.ready):
            return False
        served = self.first_request is not None and self.first_request.lineno > self.ready.lineno
        near = evidence is not None and 0 < evidence.get("lineno", 0) - self.ready.lineno <= BIND_LINES
        return near and not served

    def _notes(self, outcome: str, now: float, evidence: dict[str, Any] | None, unbound: bool) -> list[str]:
        if unbound:
            return [f"the ready line (line {self.ready.lineno}) comes before the server binds its port: "
                    "binding it failed, so the server never served"]
        if outcome == "failed" and self.ready is not None:
            where = f"line {self.ready.lineno}" if self.ready.lineno else "its health check"
            lines = (evidence or {}).get("lineno", 0) - self.ready.lineno
            took = [f"{lines} lines"] if self.ready.lineno and lines > 0 else []
            took += [f"{now - self.ready_at:.0f} s"] if now > self.ready_at else []
            return [f"the server was ready (at {where}) {' and '.join(took) or 'just'} before it failed: "
                    "a crash while serving, not at start-up"]
        if outcome == "ready" and self.ready is None and self._only_requests():
            return ["no ready line in the log, but the server answered requests (with errors, each the "
                    "request's own, not a failure of the server): it was up"]
        if outcome == "ready" and self.ready is None and self._ended_warming_up():
            return ["the log ends after the HTTP server came up, during the server's own warm-up and before "
                    "its ready line, with nothing failing: check the health endpoint"]
        if outcome == "ready" and self.ready is None and self._ended_engine_up():
            return ["an offline engine (no HTTP server in its log): the log ends as the engine finished starting, "
                    "with nothing failing and no prompt run yet; whether it then served is not in the log"]
        if outcome == "ready" and self.ready is None:
            return ["the log ends as the HTTP server started, with no ready line of its own (a logging config "
                    "may send uvicorn's lines elsewhere): check the health endpoint"]
        if outcome == "ready" and self.owner == "unknown":
            return ["the health endpoint answered, but whose port it is could not be checked "
                    "(another host, network namespace or container): the listening socket is not in this "
                    "machine's view"]
        if outcome == "ready" and self.owner == "unchecked" and self.ready is not None and self.ready.kind == "probe":
            return [f"the health endpoint answered (the port is held by {self.holder}), but no process is known "
                    "for this log (no --pid, and none has it open for writing): that it is this log's server was "
                    "not checked (--pid ties them)"]
        if outcome == "ready" and self.ready is not None and self.ready.lineno:
            after = [s for s in (self.stopped, self.ended) if s is not None and s.lineno > self.ready.lineno]
            if after:
                end = min(after, key=lambda s: s.lineno)
                how = "was stopped from outside" if end is self.stopped else "shut down"
                lines = end.lineno - self.ready.lineno
                return [f"the server was ready (at line {self.ready.lineno}), then {how} at line {end.lineno}, "
                        f"{lines} line{'s' if lines > 1 else ''} later: {end.line.strip()[:160]}"]
        return []
