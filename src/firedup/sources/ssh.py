"""Remote targets over the system OpenSSH client: one connection per watch
carries everything (the log from a byte offset, process liveness and
activity, health probes run on the remote side), so ~/.ssh/config, agents,
ProxyJump and ControlMaster work as the user expects. Host keys are checked
as ssh always does. A dropped connection is re-opened with backoff and
resumes at the last byte received: no line lost, none twice."""

from __future__ import annotations

import base64
import itertools
import json
import os
import queue
import re
import shlex
import subprocess
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import IO, Any
from urllib.parse import urlsplit

from .._exceptions import InputError, SSHError

BACKOFF = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
# Seconds ssh waits for a host to answer (a black-holed address would wait for TCP's own timeout)
CONNECT_TIMEOUT = 10
# Extra arguments for every ssh call (e.g. "-F /path/config"), as docs/contract.md names it.
SSH_ARGS_ENV = "FIREDUP_SSH_ARGS"
REMOTE_STATE = "~/.local/state/firedup"


class PortTaken(Exception):
    """The agent did not launch: someone on the host already listens on the port."""

    def __init__(self, port: int, holders: list[str]):
        super().__init__(f"port {port} is taken")
        self.port = port
        self.holders = holders


@dataclass(frozen=True)
class Host:
    user: str | None
    host: str
    port: int | None

    @classmethod
    def parse(cls, text: str) -> Host:
        m = re.fullmatch(r"(?:([^@/:\s]+)@)?(\[[^\]]+\]|[^@/:\s]+)(?::(\d+))?", text)
        if not m:
            raise InputError(f"not a host: {text!r} (expected [user@]host[:port])")
        return cls(m.group(1), m.group(2).strip("[]"), int(m.group(3)) if m.group(3) else None)

    def __str__(self) -> str:
        return (f"{self.user}@" if self.user else "") + self.host + (f":{self.port}" if self.port else "")


def parse_target(target: str) -> tuple[Host, str] | None:
    """``ssh://[user@]host[:port]/abs/path`` (or ``/~/path``, under the remote home) → (host, path);
    None for a local target."""
    if not target.startswith("ssh://"):
        return None
    parts = urlsplit(target)
    if not parts.hostname or not parts.path or parts.path == "/":
        raise InputError(f"not a remote log: {target!r} (expected ssh://[user@]host[:port]/abs/path)")
    netloc = parts.netloc
    # ssh://host/~/logs/x.log: a path under the remote user's home, as launch --host writes its logs
    return Host.parse(netloc), parts.path[1:] if parts.path.startswith("/~/") else parts.path


def ssh_command(host: Host, remote: list[str], extra: Sequence[str] = ()) -> list[str]:
    argv = ["ssh", *shlex.split(os.environ.get(SSH_ARGS_ENV, "")), *extra,
            "-o", "BatchMode=yes", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
            "-o", f"ConnectTimeout={CONNECT_TIMEOUT}"]  # ssh keeps the first value: the user's own wins
    if host.port:
        argv += ["-p", str(host.port)]
    argv += [f"{host.user}@{host.host}" if host.user else host.host, "--"]
    return argv + [shlex.join(remote)]


# The remote side: these modules (standard library only) are sent, compressed, on
# the ssh command line, and imported there from memory by _BOOTSTRAP; no file is
# written on the host and no second connection is made.
AGENT_MODULES = ("firedup.sources.remote_agent", "firedup.sources.owners", "firedup.sources.pgroup",
                 "firedup.sources.file", "firedup.ledger.environment")
_BOOTSTRAP = """\
import base64, importlib.abc, importlib.util, json, linecache, sys, zlib
SOURCES = json.loads(zlib.decompress(base64.b64decode(sys.argv[1])))
class Shipped(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name in SOURCES:
            return importlib.util.spec_from_loader(name, self, origin=SOURCES[name][0], is_package=SOURCES[name][1])
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        origin, _, text = SOURCES[module.__name__]
        linecache.cache[origin] = (len(text), None, text.splitlines(True), origin)
        exec(compile(text, origin, "exec"), module.__dict__)
sys.meta_path.insert(0, Shipped())
from firedup.sources.remote_agent import main
sys.exit(main(sys.argv[2]))
"""


def _agent_sources() -> str:
    """The agent's modules and the packages above them (empty there: the
    remote side needs none of firedup's own imports), compressed."""
    sources: dict[str, tuple[str, bool, str]] = {}
    for name in AGENT_MODULES:
        parts = name.split(".")
        for i in range(1, len(parts)):
            package = ".".join(parts[:i])
            sources.setdefault(package, (f"<firedup agent>/{package.replace('.', '/')}/__init__.py", True, ""))
        package, _, module = name.rpartition(".")
        text = resources.files(package).joinpath(f"{module}.py").read_text("utf-8")
        sources[name] = (f"<firedup agent>/{name.replace('.', '/')}.py", False, text)
    return base64.b64encode(zlib.compress(json.dumps(sources).encode(), 9)).decode()


def agent_command(host: Host, args: dict[str, Any], ssh_args: Sequence[str] = ()) -> list[str]:
    """The ssh command that runs the agent on ``host`` with these arguments."""
    encoded = base64.b64encode(json.dumps(args).encode()).decode()
    return ssh_command(host, ["python3", "-c", _BOOTSTRAP, _agent_sources(), encoded], list(ssh_args))


def _start_agent(host: Host, args: dict[str, Any], ssh_args: Sequence[str]) -> subprocess.Popen[bytes]:
    """ssh to the host, running the agent with these arguments."""
    return subprocess.Popen(agent_command(host, args, ssh_args),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _pipes(proc: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes], IO[bytes]]:
    """An agent's stdin, stdout and stderr (it is always started with all three)."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    return proc.stdin, proc.stdout, proc.stderr


def _hang_up(proc: subprocess.Popen[bytes]) -> None:
    """End an agent's connection: the agent ends when its stdin does; killed if it does not."""
    try:
        _pipes(proc)[0].close()
        proc.wait(timeout=3)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()


def _classify(stderr: str, host: Host) -> str | None:
    """A clear one-line error for failures that retrying will not fix."""
    text = stderr.strip()
    if re.search(r"Could not resolve hostname|Name or service not known", text):
        return f"unknown host {host.host}"
    if "Permission denied (" in text:
        return f"cannot log in to {host}: authentication failed (ssh: {text.splitlines()[-1]})"
    if "Host key verification failed" in text or "REMOTE HOST IDENTIFICATION HAS CHANGED" in text:
        return f"host key of {host} not trusted: check ~/.ssh/known_hosts (ssh: {text.splitlines()[-1]})"
    if re.search(r"python3: (?:command )?not found|No such file or directory.*python3", text):
        return f"{host} has no python3 on its PATH: firedup's remote side needs it"
    if re.search(r"Connection refused|Connection timed out|Operation timed out|No route to host|"
                 r"Network is unreachable|Connection closed by \S+ port \d+$", text):
        return f"cannot reach {host} (ssh: {text.splitlines()[-1].removeprefix('ssh: ')})"
    return None


class RemoteSource:
    """Events from the remote agent: ("log", bytes), ("evidence", dict),
    ("exit", code), ("probe", dict), ("started", pid), ("error", message),
    ("waiting", None) (the log does not exist yet, said once)."""

    def __init__(self, host: Host, path: str, *, pid: int | None = None, url: str | None = None,
                 launch: list[str] | None = None, ssh_args: Sequence[str] = (), clock=time.monotonic,
                 snapshot: bool = False, port_check: bool = True):
        self.host = host
        self.port_check = port_check
        self.path = path
        self.pid = pid
        self.url = url
        self.launch = launch
        self.snapshot = snapshot
        self.ssh_args = list(ssh_args)
        self.clock = clock
        self.inode: int | None = None
        self.offset = 0
        self.connects = 0
        self.exited = False
        self._proc: subprocess.Popen | None = None
        self._buf = b""
        self._retry_at: float | None = None
        self._attempt = 0
        self._received_any = False
        self._waiting = False
        # since when the connection is down and not back (and ssh's last word on it)
        self.lost_since: float | None = None
        self.lost_why = ""
        self.connect()

    # -- the connection -------------------------------------------------------

    def _args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"path": self.path, "offset": self.offset, "inode": self.inode, "pid": self.pid,
                                "url": self.url, "port_check": self.port_check, "first": not self._received_any}
        if self.launch and self.pid is None:
            args["launch"] = self.launch
            if self.snapshot:
                args["snapshot"] = self.launch
        return args

    def connect(self) -> None:
        self._proc = _start_agent(self.host, self._args(), self.ssh_args)
        os.set_blocking(_pipes(self._proc)[1].fileno(), False)
        self._buf = b""
        self.connects += 1

    def fileno(self) -> int:
        return _pipes(self._proc)[1].fileno() if self._proc is not None else -1

    @property
    def connected(self) -> bool:
        return self._proc is not None

    def disconnect(self) -> None:
        """Drop the connection (a launched server keeps running)."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._close_pipes()
            self._proc = None

    def _close_pipes(self) -> None:
        assert self._proc is not None
        for pipe in _pipes(self._proc):
            pipe.close()

    def stop_server(self, grace: float) -> None:
        if self._proc is not None and self._proc.stdin is not None:
            try:
                self._proc.stdin.write(f"K {grace}\n".encode())
                self._proc.stdin.flush()
            except OSError:
                pass

    def close(self) -> None:
        if self._proc is not None:
            _hang_up(self._proc)
            self._close_pipes()
            self._proc = None

    # -- events ----------------------------------------------------------------

    def events(self) -> list[tuple[str, Any]]:
        now = self.clock()
        if self._proc is None:
            if self._retry_at is not None and now >= self._retry_at:
                self._retry_at = None
                self.connect()
            return []
        out: list[tuple[str, Any]] = []
        try:
            data = _pipes(self._proc)[1].read()
        except (BlockingIOError, ValueError):
            data = None
        if data:
            self._buf += data
            *lines, self._buf = self._buf.split(b"\n")
            for line in lines:
                self._record(line, out)
        elif data == b"":  # the connection ended
            self._proc.wait()
            stderr = _pipes(self._proc)[2].read().decode(errors="replace")
            self._close_pipes()
            self._proc = None
            problem = _classify(stderr, self.host)
            if problem and not self._received_any:
                raise SSHError(problem)
            if not self.exited or self.launch:
                delay = BACKOFF[min(self._attempt, len(BACKOFF) - 1)]
                self._attempt += 1
                self._retry_at = now + delay
                why = (stderr.strip().splitlines() or ["connection closed"])[-1]
                self.lost_since = now if self.lost_since is None else self.lost_since
                self.lost_why = why
                out.append(("disconnected", why))
        return out

    def _record(self, line: bytes, out: list) -> None:
        kind, _, payload = line.partition(b" ")
        self._received_any = True
        self._attempt = 0
        self.lost_since = None
        if kind == b"L":
            data = base64.b64decode(payload)
            self.offset += len(data)
            out.append(("log", data))
        elif kind == b"O":
            inode, offset = payload.split()
            if int(inode) != self.inode or int(offset) < self.offset:
                out.append(("reopened", None))
            self.inode, self.offset = int(inode), int(offset)
        elif kind == b"N" and self.inode is None and not self._waiting:  # once; a log that went is not "not yet"
            self._waiting = True
            out.append(("waiting", None))
        elif kind == b"P":
            out.append(("evidence", json.loads(payload)))
        elif kind == b"X":
            self.exited = True
            out.append(("exit", int(payload)))
        elif kind == b"H":
            out.append(("probe", json.loads(payload)))
        elif kind == b"S":
            self.pid = int(payload)
            out.append(("started", self.pid))
        elif kind == b"V":
            out.append(("environment", json.loads(payload)))
        elif kind == b"W":
            writer = json.loads(payload)
            self.pid = writer.get("pid")
            out.append(("writer", writer))
        elif kind == b"B":
            raise PortTaken(**json.loads(payload))
        elif kind == b"E":
            out.append(("error", payload.decode(errors="replace")))


class Channel:
    """One SSH connection to a host's agent in hub mode (a Slurm job through
    its login node): the scheduler's commands run there, and every log of the
    job comes back on it, each a :class:`TailSource`. A reader thread sorts
    the records out. A dropped connection is re-opened with backoff: logs
    resume at their offsets, commands in flight are asked again, except an
    sbatch, which fails rather than risk submitting the job twice."""

    def __init__(self, host: Host, ssh_args: Sequence[str] = ()):
        self.host = host
        self.ssh_args = list(ssh_args)
        self.connects = 0
        self.tails: list[TailSource] = []
        self._calls: dict[int, _Call] = {}
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        self._closing = False
        self._error: str | None = None
        self._proc = self._connect()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _connect(self) -> subprocess.Popen[bytes]:
        proc = _start_agent(self.host, {"hub": True}, self.ssh_args)
        self.connects += 1
        return proc

    def _send(self, line: str) -> None:
        try:
            stdin = _pipes(self._proc)[0]
            stdin.write(line.encode() + b"\n")
            stdin.flush()
        except (OSError, ValueError):
            pass  # the connection dropped: the reader re-opens it and sends again

    def run(self, argv: list[str], stdin: str | None = None, timeout: float = 30) -> tuple[int | None, str, str]:
        """(exit status, None if it timed out; stdout; stderr) of a command run on the host."""
        call = _Call({"argv": list(argv), "stdin": stdin, "timeout": timeout}, once=argv[0] == "sbatch")
        with self._lock:
            if self._error:
                raise SSHError(self._error)
            n = next(self._numbers)
            self._calls[n] = call
            self._send(f"C {n} {json.dumps(call.request)}")
        if not call.done.wait(timeout + 30):
            with self._lock:
                self._calls.pop(n, None)
            raise SSHError(f"{self.host} did not answer {argv[0]} in {timeout + 30:.0f} s")
        if call.error:
            raise SSHError(call.error)
        reply = call.reply
        assert reply is not None
        return reply["rc"], reply["stdout"], reply["stderr"]

    def follow(self, path: str) -> TailSource:
        with self._lock:
            tail = TailSource(self, len(self.tails), path)
            self.tails.append(tail)
            self._send(tail.request())
        return tail

    def probe(self, tail: TailSource) -> None:
        with self._lock:
            self._send(f"U {tail.index} {tail.url}")

    def close(self) -> None:
        self._closing = True
        _hang_up(self._proc)
        self._reader.join(3)
        for tail in self.tails:
            tail.close()

    def _read(self) -> None:
        attempt, received = 0, False
        while True:
            for line in _pipes(self._proc)[1]:
                received, attempt = True, 0
                self._record(line.rstrip(b"\n"))
            self._proc.wait()
            stderr = _pipes(self._proc)[2].read().decode(errors="replace")
            if self._closing:
                return
            problem = _classify(stderr, self.host)
            with self._lock:
                if problem and not received:
                    self._fail(problem)
                    return
                for tail in self.tails:
                    tail.put("disconnected", stderr.strip().splitlines()[-1:] or ["connection closed"])
            time.sleep(BACKOFF[min(attempt, len(BACKOFF) - 1)])
            attempt += 1
            with self._lock:
                self._proc = self._connect()
                for tail in self.tails:
                    self._send(tail.request())
                    if tail.url:
                        self._send(f"U {tail.index} {tail.url}")
                for n, call in self._calls.items():
                    if call.once:
                        call.error = f"the connection to {self.host} dropped during {call.request['argv'][0]}"
                        call.done.set()
                    else:
                        self._send(f"C {n} {json.dumps(call.request)}")

    def _fail(self, problem: str) -> None:
        self._error = problem
        for call in self._calls.values():
            call.error = problem
            call.done.set()
        for tail in self.tails:
            tail.put("error", problem)

    def _record(self, line: bytes) -> None:
        kind, _, rest = line.partition(b" ")
        tag, _, payload = rest.partition(b" ")
        if kind == b"R":
            with self._lock:
                call = self._calls.pop(int(tag), None)
            if call is not None:
                call.reply = json.loads(payload)
                call.done.set()
        elif kind in (b"L", b"O", b"E", b"H"):
            self.tails[int(tag)].record(kind, payload)


@dataclass
class _Call:
    request: dict[str, Any]
    once: bool  # not to be run twice (sbatch)
    reply: dict[str, Any] | None = None
    error: str | None = None
    done: threading.Event = field(default_factory=threading.Event)


class TailSource:
    """One log of a :class:`Channel`, read by a Watch like a RemoteSource:
    events() and a file descriptor that is readable when there are some."""

    pid = None
    launch = None

    def __init__(self, channel: Channel, index: int, path: str):
        self.channel = channel
        self.host = channel.host
        self.index = index
        self.path = path
        self.url: str | None = None
        self.inode: int | None = None
        self.offset = 0
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def request(self) -> str:
        return f"F {self.index} {json.dumps({'path': self.path, 'offset': self.offset, 'inode': self.inode})}"

    def probe(self, url: str) -> None:
        """Probe this health URL from the host (the nodes' addresses are reachable from there)."""
        self.url = url
        self.channel.probe(self)

    def put(self, kind: str, payload: Any) -> None:
        self._events.put((kind, payload))
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:  # a wake-up is pending already
            pass

    def record(self, kind: bytes, payload: bytes) -> None:
        if kind == b"L":
            data = base64.b64decode(payload)
            self.offset += len(data)
            self.put("log", data)
        elif kind == b"O":
            inode, offset = (int(x) for x in payload.split())
            if inode != self.inode or offset < self.offset:
                self.put("reopened", None)
            self.inode, self.offset = inode, offset
        elif kind == b"H":
            self.put("probe", json.loads(payload))
        elif kind == b"E":
            self.put("error", payload.decode(errors="replace"))

    def fileno(self) -> int:
        return self._wake_r

    def events(self) -> list[tuple[str, Any]]:
        try:
            os.read(self._wake_r, 1 << 16)
        except BlockingIOError:
            pass
        out = []
        while not self._events.empty():
            out.append(self._events.get())
        return out

    def close(self) -> None:
        os.close(self._wake_r)
        os.close(self._wake_w)
