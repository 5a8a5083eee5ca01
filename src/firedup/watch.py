"""The live loop: follow a log (and optionally a process and its HTTP port),
feed the rules engine and the judge as events arrive, and stop at the verdict.

It sleeps in one ``select()`` on: inotify (the log's directory changed), a
pidfd (the server exited), the probe thread's wake pipe, or standard input;
with a short timeout as a safety net (polling when inotify is missing) and to
let the judge's deadlines pass."""

from __future__ import annotations

import codecs
import os
import re
import selectors
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, BinaryIO

from ._exceptions import InputError, SSHError
from ._sniff import UTF16_BOMS, compression, not_a_log
from .defaults import CONFIRM, GRACE, IDLE, QUIET, SETTLE, STALL
from .engine import Engine
from .judge import Judge, Verdict
from .signals import Signal
from .sinks import Sink
from .sources import inotify, owners
from .sources.file import FileFollower
from .sources.http import Prober, address_of, is_local
from .sources.process import UNKNOWN_EXIT, ExitWatch
from .sources.procstat import TreeSampler, working
from .sources.ssh import RemoteSource, TailSource

SAMPLE_EVERY = 1.0
POLL = 0.25  # the longest sleep: deadlines and polling fallback
STACK_DUMP_TIMEOUT = 20
NEVER_APPEARED = ("No log appeared at the path watched within the stall window, so nothing is known of a server: "
                  "it was not started, writes elsewhere, or the path is mistyped.")
NEVER_APPEARED_REMEDY = ("Check the path (the server's redirection or --log-file, its folder) and that the server "
                         "runs (ps); then watch again, or start it with firedup launch.")
NO_WRITER = ("no process has the log open for writing (or none this user can see): the verdict comes from the log "
             "alone; an exception followed by silence is failed")


STOPPED_NOTE = ("its processes are stopped (state T: a SIGSTOP, Ctrl-Z in its terminal, a debugger): it goes on "
                "only once they are sent SIGCONT")


# Commands that run a server elsewhere (another node, a container's network) and
# relay its output: the port its ready line names is not this machine's to check.
_RELAYS = {"srun", "salloc", "mpirun", "mpiexec", "ssh", "docker", "podman", "nerdctl", "kubectl", "oc"}
# The port a ready line names: uvicorn's "running on http://127.0.0.1:30000", llama-server's "listening on ...".
_PORT_IN_READY = re.compile(r"https?://[^\s/]*:(\d{2,5})\b")


class Watch:
    """Follows one server to its verdict: a log file (``log``), a stream, or a
    remote log; with a process (``pid``) and a health URL when known. ``run()``
    returns the verdict; the sinks hear the events on the way."""

    def __init__(self, *, log: str | None = None, stream: BinaryIO | None = None, server: str | None = None,
                 pid: int | None = None, exit_watch: ExitWatch | None = None, url: str | None = None,
                 stall: float | None = STALL, timeout: float | None = None, grace: float = GRACE,
                 sinks: Sequence[Sink] = (), clock: Callable[[], float] = time.monotonic,
                 offset: int = 0, probe_generate: bool = False, remote: RemoteSource | TailSource | None = None,
                 cancel: threading.Event | None = None, stall_for: dict[str, float] | None = None,
                 expect: dict[str, Any] | None = None, quiet: float = QUIET,
                 listening_before: set[str] | None = None, scheduler: Any = None):
        if probe_generate and not url:
            raise InputError("--probe-generate needs the server's base URL: pass --url")
        self.clock = clock
        self.started = clock()
        self.engine = Engine(server=server)
        self.ruleset = self.engine.ruleset
        self._stream_ready = False
        # Standard input redirected from a regular file (or /dev/null) cannot be
        # waited on (epoll refuses it with EPERM); it is always readable, to its end.
        self._stream_always_ready = False
        self.exit_watch = exit_watch or (ExitWatch(pid) if pid else None)
        # No process known: the log's writer is looked for; until one is found
        # a fatal exception followed by silence decides.
        # A scheduler's job: slurmstepd writes its log, and the scheduler says when it ended.
        self._find_writer = bool(log) and self.exit_watch is None and scheduler is None
        log_only = self.exit_watch is None and not (remote and (remote.pid or remote.launch)) and scheduler is None
        self.judge = Judge(now=self.started, stall=stall, timeout=timeout, grace=grace, server=server,
                           confirm=CONFIRM if url or (remote and remote.url) else None,
                           require_generate=bool(url and probe_generate), stall_for=stall_for,
                           quiet=quiet if log_only else None, settle=SETTLE)
        # The sockets on the server's port from before it started (launch):
        # one of them answering is another server.
        self.listening_before = listening_before
        self.expect = expect
        self.probe_generate = probe_generate
        self.remote = remote
        # A scheduler's job (sources.slurm): its signals() say queued, running, requeued, ended.
        self.scheduler = scheduler
        self.cancel = cancel
        self._remote_sample: dict[str, Any] | None = None
        self._remote_ran: set[str] = set()  # the commands the remote tree has run (procstat.working)
        self.environment: dict[str, Any] | None = None  # a remote host's, when its agent sends it
        self.follower = FileFollower(log, offset) if log else None
        # a path under the remote home (~/...) as a target to paste: ssh://host/~/...
        home = "/" if remote and remote.path.startswith("~") else ""
        self.log_name = log or (f"ssh://{remote.host}{home}{remote.path}" if remote else "-")
        # the remote agent found no log, and none has appeared since (hub mode does not say)
        self._remote_missing = False
        self.stream = stream
        # a pipe's end is its writer's: a server piped into firedup that closes it has ended
        self._piped = stream is not None and stat.S_ISFIFO(os.fstat(stream.fileno()).st_mode)
        self.sampler = TreeSampler(self.exit_watch.pid) if self.exit_watch else None
        self.url = url
        self.prober: Prober | None = None
        self.sinks = list(sinks)
        self._phase: str | None = None
        self._progress: dict[str, Any] | None = None
        self._warnings = 0
        self._last_line = ""
        self._last_data = self.started
        self._idle = True  # nothing read since the last idle flush
        self._sniffed = False  # the log's first bytes were looked at: text, not a binary file
        self._utf16: codecs.IncrementalDecoder | None = None  # the log is UTF-16 (it began with its BOM)
        self._owner_cache: tuple[frozenset[str], tuple[str, str | None]] | None = None
        self._writer_input: str | None = None  # the pipe the log's writer reads (server | tee log), when one was found
        self._scanned: tuple[int, int] | None = None  # the log (inode, size) when its writer was last looked for

    # -- the loop ------------------------------------------------------------

    def run(self) -> Verdict | None:
        """Follow to the verdict (None only when ``cancel`` was set)."""
        sel = selectors.DefaultSelector()
        notify = None
        if self.follower is not None and inotify.available():
            notify = inotify.Inotify()
            try:
                notify.watch(self.follower.directory)
                sel.register(notify, selectors.EVENT_READ)
            except OSError:  # the directory does not exist yet: poll
                notify.close()
                notify = None
        if self.stream is not None:
            try:
                sel.register(self.stream, selectors.EVENT_READ)
            except PermissionError:
                self._stream_always_ready = True
        if self.exit_watch is not None:
            sel.register(self.exit_watch, selectors.EVENT_READ)
        if self.url:
            self._start_prober(sel)
        self._emit(0.0, "start", server=self.engine.family, log=self.log_name,
                   pid=self.exit_watch.pid if self.exit_watch else None, url=self.prober.url if self.prober else None)
        if self.follower is not None and not os.path.exists(self.follower.path):  # not opened yet either way
            self._emit(0.0, "waiting", log=self.log_name)
        if self.expect:
            self._emit(0.0, "expect", **self.expect)
        self._look_for_writer(sel, self.started)
        next_sample = self.started
        remote_fd = -1
        try:
            while True:
                if self.cancel is not None and self.cancel.is_set():
                    return None
                now = self.clock()
                self._read(now)
                if self._find_writer:
                    self._look_for_writer(sel, now)
                if self.remote is not None:
                    self._remote_events(now)
                    if self.remote.fileno() != remote_fd:  # reconnected: a new pipe
                        if remote_fd >= 0:
                            sel.unregister(remote_fd)
                        remote_fd = self.remote.fileno()
                        if remote_fd >= 0:
                            sel.register(remote_fd, selectors.EVENT_READ)
                if self.scheduler is not None:
                    self._scheduler_events(now, sel)
                if self.prober is not None:
                    self._probes(now)
                if self.sampler is not None and now >= next_sample:
                    next_sample = now + SAMPLE_EVERY
                    evidence = self.sampler.progress()
                    if evidence is not None:
                        self.judge.feed(Signal("evidence", data=evidence), now)
                if self.exit_watch is not None and self.judge.exit_code is None:
                    code = self.exit_watch.poll()
                    if code is not None:
                        self._read(now)  # what it wrote before it died
                        self._close_input(now)
                        self.judge.feed(Signal("exit", data={"code": code}), now)
                        self._emit(now - self.started, "exit", code=code)
                if not self._idle and now - self._last_data >= IDLE:
                    self._idle = True
                    self._feed(self.engine.idle(), now)
                verdict = self.judge.decide(now)
                if verdict is None and not (self.follower or self.stream or self.exit_watch or self.remote):
                    verdict = self._input_ended(now)
                if verdict is not None:
                    lost = self.remote.lost_since if isinstance(self.remote, RemoteSource) else None
                    if verdict.outcome == "stalled" and lost is not None:
                        # silence because the host went out of reach, not because the server stalled
                        assert isinstance(self.remote, RemoteSource)
                        raise SSHError(f"lost the connection to {self.remote.host} {now - lost:.0f} s ago and could "
                                       f"not reconnect (ssh: {self.remote.lost_why}): no verdict on the server")
                    if verdict.outcome == "stalled" and self.sampler is not None:  # a process is known
                        verdict = replace(verdict, stacks=stack_dump(self.sampler.sample()))
                        if self.sampler.stopped():
                            verdict = replace(verdict, notes=[*verdict.notes, STOPPED_NOTE])
                    if self.follower is not None and not self.follower.exists or self._remote_missing:
                        verdict = replace(verdict, notes=[*verdict.notes, f"the log {self.log_name} never appeared"])
                        if verdict.outcome == "stalled" and self.judge.last_line is None:
                            # nothing was read: no server to say anything about, only a path
                            verdict = replace(verdict, explanation=NEVER_APPEARED, remedy=NEVER_APPEARED_REMEDY)
                    return verdict
                self._view(now)
                for key, _ in sel.select(self._sleep(now)):
                    if key.fileobj is notify:
                        notify.drain()
                    elif key.fileobj is self.stream:
                        self._stream_ready = True
        finally:
            sel.close()
            if notify is not None:
                # Closing an inotify descriptor waits for a kernel RCU grace
                # period (tens of ms): keep that off the verdict's path.
                threading.Thread(target=notify.close, daemon=True).start()
            if self.prober is not None:
                self.prober.close()
            if self.exit_watch is not None:
                self.exit_watch.close()

    def _sleep(self, now: float) -> float:
        """Until the next thing to do without input: an idle flush, a deadline."""
        if self.stream is not None and self._stream_always_ready:
            return 0.0
        times = [now + POLL]
        if not self._idle:
            times.append(self._last_data + IDLE)
        deadline = self.judge.next_deadline()
        if deadline is not None and deadline > now:  # one passed without a verdict waits for input: no busy loop
            times.append(deadline)
        return max(0.0, min(times) - now)

    def _look_for_writer(self, sel: selectors.BaseSelector, now: float) -> None:
        """A log watched alone: the process writing it stands in for --pid (its
        exit, its activity). Looked for when the log appears, and again while
        none is found whenever the log starts over: a new file, a truncation,
        or the first bytes of a log that was empty (a server started with
        ``> log`` after the watch)."""
        if not self._find_writer or self.follower is None:
            return
        try:
            st = os.stat(self.follower.path)
        except OSError:
            return
        scanned, self._scanned = self._scanned, (st.st_ino, st.st_size)
        if scanned is not None and scanned[0] == st.st_ino and 0 < scanned[1] <= st.st_size:
            return
        if scanned is not None and scanned[0] == st.st_ino and scanned[1] == st.st_size:
            return  # still empty
        for pid in owners.writers(self.follower.path, exclude=owners.lineage(os.getpid())):
            try:
                self.exit_watch = ExitWatch(pid)
            except OSError:  # gone already, or not ours to watch
                continue
            self._find_writer = False
            self._writer_input = owners.input_pipe(pid)  # a writer that is not the server (tee): what feeds it is
            self.sampler = TreeSampler(pid)
            sel.register(self.exit_watch, selectors.EVENT_READ)
            self.judge.quiet = None  # its exit will tell
            self._emit(now - self.started, "writer", pid=pid, command=owners.command_of(pid))
            return
        if scanned is None:
            self._emit(now - self.started, "writer", pid=None, note=NO_WRITER)

    def _ready_run_gone(self, s: Signal) -> bool:
        """Whether a ready line names a port nobody listens on while the log's
        writer, found on this machine, is a server itself: the line is an
        earlier run's, whose server is gone. Not for a writer that relays
        another machine's or container's output (srun, ssh, docker run, kubectl
        logs -f, tee): its server's port is not this machine's to see."""
        if self.exit_watch is None or self.remote is not None:
            return False
        port = _PORT_IN_READY.search(s.line)
        argv = (owners.command_of(self.exit_watch.pid) or "").split()
        if port is None or self.ruleset.detect_command(argv) is None \
                or any(os.path.basename(word) in _RELAYS for word in argv):  # (a stray word: the check is skipped)
            return False
        return not owners.listening_inodes(int(port.group(1)), seen_by=self.exit_watch.pid)

    def _data(self, data: bytes, now: float) -> None:
        self._last_data = now
        self._idle = False
        self._feed(self.engine.feed(data) + self.engine.peek(), now)

    def _start_prober(self, sel: selectors.BaseSelector) -> None:
        assert self.url is not None
        self.prober = Prober(self.url, self._health_path(), generate=self.probe_generate)
        sel.register(self.prober, selectors.EVENT_READ)
        self.prober.start()

    def _scheduler_events(self, now: float, sel: selectors.BaseSelector) -> None:
        for s in self.scheduler.signals():
            if s.kind == "requeued":  # a new attempt rewrites the log: read it as a new start
                self.engine = Engine(server=self.judge.server)
            self._read(now)  # the log's lines come before the scheduler's word on them
            if s.kind == "exit":
                self._close_input(now)
            if s.kind in ("queued", "running", "requeued", "exit"):
                self._emit(now - self.started, s.kind, line=s.line, **s.data)
            self._feed([s], now)
            probing = self.prober is not None or (self.remote is not None and self.remote.url)
            if s.kind == "running" and s.data.get("url") and not probing:
                self.url = s.data["url"]  # the head node's address is known once it runs
                self.judge.confirm = CONFIRM
                if isinstance(self.remote, TailSource):  # through a login node: the nodes are reachable from there
                    self.remote.probe(self.url.rstrip("/") + self._health_path())
                else:
                    self._start_prober(sel)

    def _read(self, now: float) -> None:
        while self.follower is not None and (chunk := self.follower.read()):
            # from a given offset, the caller's word that it is a log: nothing to check
            self._data(self._as_text(chunk, None if self.follower.start_offset else self.follower.path), now)
        if self.stream is not None and (self._stream_ready or self._stream_always_ready):
            self._stream_ready = False
            data = self._as_text(os.read(self.stream.fileno(), 1 << 20), "standard input")
            if data:
                self._data(data, now)
            else:  # standard input ended: the log is finished
                self._close_input(now)
                self.stream = None

    def _as_text(self, data: bytes, name: str | None) -> bytes:
        """The input's bytes as the engine reads them: its first bytes checked to be a log's (``name``: what
        to call it when they are not; None: not checked), UTF-16 decoded."""
        if data and not self._sniffed:
            self._sniffed = True
            packed = compression(data)
            refused = f"this is a {packed}-compressed log, which no server is still writing: read it with firedup " \
                "diagnose" if packed else not_a_log(data)
            if refused and name is not None:
                raise InputError(f"{name}: {refused}")
            if data.startswith(UTF16_BOMS):
                # Windows PowerShell 5 writes a redirected program's output (llama-server > log.txt) as UTF-16
                self._utf16 = codecs.getincrementaldecoder("utf-16")(errors="replace")
        return self._utf16.decode(data).encode() if data and self._utf16 is not None else data

    def _close_input(self, now: float) -> None:
        self._feed(self.engine.close(), now)

    def _health_path(self) -> str:
        family = self.engine.family
        pack = self.ruleset.packs.get(family) if family else None
        return pack.health if pack and pack.health else "/health"

    def _probes(self, now: float) -> None:
        assert self.prober is not None
        for result in self.prober.results():
            self._probe(result, self.prober.url, now)

    def _probe(self, result: dict[str, Any], url: str | None, now: float) -> None:
        family = self.engine.family
        pack = self.ruleset.packs.get(family) if family else None
        ready_by_health = pack.health_ready if pack else True
        status, generate = result["status"], result.get("generate")
        line = f"GET {url} -> {status}"
        if self.probe_generate:
            line += f", POST /v1/completions (1 token) -> {generate}"
        ready = status == 200 and ready_by_health and (generate == 200 or not self.probe_generate)
        data = {**result, "ready": ready}
        if status is not None and "owner" not in data and self.prober is not None:
            data["owner"], data["holder"] = self._owner()
        if data.get("owner") == "foreign":
            line += f" (answered by {data.get('holder')}, not the server watched)"
            if self.judge.owner != "foreign":
                self._emit(now - self.started, "port", owner="foreign", holder=data.get("holder"))
        self.judge.feed(Signal("probe", line=line, data=data), now)

    def _owner(self) -> tuple[str, str | None]:
        """Whose server answered the probe (tree, foreign or unknown), and who holds the port."""
        assert self.prober is not None
        host, port = self.prober.host, self.prober.port
        if not is_local(host):
            return "unknown", None
        # Finding a socket's process reads every process's fds: only when the
        # set of listening sockets changed since the last answer.
        key = frozenset(owners.listening_inodes(port, address_of(host)))
        if self._owner_cache is None or self._owner_cache[0] != key:
            pid = self.exit_watch.pid if self.exit_watch else None
            owner, holders = owners.ownership(port, pid, self.listening_before, address_of(host), self._writer_input)
            self._owner_cache = (key, (owner, ", ".join(h.describe() for h in holders) or None))
        return self._owner_cache[1]

    def _input_ended(self, now: float) -> Verdict:
        """Standard input ended and nothing else is followed: the log as diagnose
        reads it, except that from a pipe, a start with no verdict in it
        (incomplete) ended because its writer closed the pipe, as a server that
        exits does (``server | firedup watch -``): judged as an exit, status
        unknown. A file's end (``< server.log``) is only where it was read to."""
        verdict = self.judge.finish(now)
        if verdict.outcome != "incomplete" or not self._piped:
            return verdict
        self.judge.feed(Signal("exit", data={"code": UNKNOWN_EXIT}), now)
        return self.judge.decide(now) or verdict

    def _remote_events(self, now: float) -> None:
        assert self.remote is not None
        for kind, payload in self.remote.events():
            if kind == "log":
                self._data(payload, now)
            elif kind == "evidence":
                if working(self._remote_sample, payload, self._remote_ran):
                    self.judge.feed(Signal("evidence", data=payload), now)
                self._remote_sample = payload
            elif kind == "exit" and self.judge.exit_code is None:
                self._close_input(now)
                self.judge.feed(Signal("exit", data={"code": payload}), now)
                self._emit(now - self.started, "exit", code=payload)
            elif kind == "probe":
                self._probe(payload, self.remote.url, now)
            elif kind == "error":
                raise InputError(payload)
            elif kind == "waiting":
                self._remote_missing = True
                self._emit(now - self.started, "waiting", log=self.log_name)
            elif kind == "reopened":
                self._remote_missing = False
                self._emit(now - self.started, "following", offset=self.remote.offset)
            elif kind == "environment":
                self.environment = payload
            elif kind == "writer":
                if payload.get("pid"):
                    self.judge.quiet = None  # its exit will tell
                    self._emit(now - self.started, "writer", pid=payload["pid"], command=payload.get("command"))
                else:
                    self._emit(now - self.started, "writer", pid=None, note=NO_WRITER)
            elif kind in ("disconnected", "started"):
                self._emit(now - self.started, kind, detail=payload)

    # -- events for the sinks ------------------------------------------------

    def _feed(self, signals: list[Signal], now: float) -> None:
        t = now - self.started
        for s in signals:
            self.judge.feed(s, now)
            if s.kind == "ready" and self._ready_run_gone(s):
                # an earlier run's ready, in the backlog of a log a restart appends to: that
                # server was killed without a word (SIGKILL, OOM); the run being written decides
                self.judge.ended = self.judge.ended or s
            if s.kind == "lines":
                self._last_line = s.line
            elif s.kind == "config" and s.data:  # a line that only marks where start-up got has no settings
                self._emit(t, "config", config=s.data)
            elif s.kind == "benign" and self.judge.ready is None:
                self._warnings += 1
                self._emit(t, "warning", line=s.line, lineno=s.lineno, rule=s.rule.id if s.rule else None)
            elif s.kind == "progress" and self.judge.progress != self._progress:
                self._progress = self.judge.progress
                self._emit(t, "progress", **(self.judge.progress or {}))
            if self.judge.phase != self._phase:
                self._phase = self.judge.phase
                self._emit(t, "phase", phase=self._phase)

    def _emit(self, t: float, name: str, **fields: Any) -> None:
        for sink in self.sinks:
            sink.event(t, name, **fields)

    def _view(self, now: float) -> None:
        view = {"server": self.judge.server or self.engine.family, "phase": self.judge.phase,
                "progress": self.judge.progress, "elapsed": now - self.started, "last": self._last_line,
                "warnings": self._warnings, "expect": self.expect}
        for sink in self.sinks:
            sink.update(view)


def py_spy() -> str | None:
    """py-spy on PATH, or installed beside firedup's own interpreter (a venv not activated)."""
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return shutil.which("py-spy") or (beside if os.access(beside, os.X_OK) else None)


def stack_dump(sample: dict[str, Any] | None) -> str | None:
    """Python stacks of a stalled process tree, when py-spy is installed."""
    spy = py_spy()
    if spy is None or not sample:
        return None
    dumps = []
    for pid in sample["pids"]:
        try:
            out = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True,
                                 timeout=STACK_DUMP_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip():
            dumps.append(out.stdout.strip())
    return "\n\n".join(dumps) or None

