"""Remote targets over the system OpenSSH client: one connection per watch
carries everything (the log from a byte offset, process liveness and
activity, health probes run on the remote side), so ~/.ssh/config, agents,
ProxyJump and ControlMaster work as the user expects. Host keys are checked
as ssh always does. A dropped connection is re-opened with backoff and
resumes at the last byte received: no line lost, none twice."""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import subprocess
import time
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

BACKOFF = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
# Extra arguments for every ssh call (e.g. "-F /path/config"), as DESIGN.md names it.
SSH_ARGS_ENV = "FIREDUP_SSH_ARGS"
REMOTE_STATE = "~/.local/state/firedup"


class SSHError(Exception):
    """ssh could not reach or log in to the host (not worth retrying)."""


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
            raise ValueError(f"not a host: {text!r} (expected [user@]host[:port])")
        return cls(m.group(1), m.group(2).strip("[]"), int(m.group(3)) if m.group(3) else None)

    def __str__(self) -> str:
        return (f"{self.user}@" if self.user else "") + self.host + (f":{self.port}" if self.port else "")


def parse_target(target: str) -> tuple[Host, str] | None:
    """``ssh://[user@]host[:port]/abs/path`` → (host, path); None for a local target."""
    if not target.startswith("ssh://"):
        return None
    parts = urlsplit(target)
    if not parts.hostname or not parts.path or parts.path == "/":
        raise ValueError(f"not a remote log: {target!r} (expected ssh://[user@]host[:port]/abs/path)")
    netloc = parts.netloc
    return Host.parse(netloc), parts.path


def ssh_command(host: Host, remote: list[str], extra: list[str] = ()) -> list[str]:
    argv = ["ssh", *shlex.split(os.environ.get(SSH_ARGS_ENV, "")), *extra,
            "-o", "BatchMode=yes", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
    if host.port:
        argv += ["-p", str(host.port)]
    argv += [f"{host.user}@{host.host}" if host.user else host.host, "--"]
    return argv + [shlex.join(remote)]


def _agent_source() -> str:
    """The remote program: the environment snapshot's functions, who holds a
    file or port, then the agent."""
    here = resources.files(__package__)
    snapshot = resources.files("firedup.ledger").joinpath("environment.py").read_text("utf-8")
    return "\n".join((snapshot, here.joinpath("owners.py").read_text("utf-8"),
                      here.joinpath("remote_agent.py").read_text("utf-8")))


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
    return None


class RemoteSource:
    """Events from the remote agent: ("log", bytes), ("evidence", dict),
    ("exit", code), ("probe", dict), ("started", pid), ("error", message)."""

    def __init__(self, host: Host, path: str, *, pid: int | None = None, url: str | None = None,
                 launch: list[str] | None = None, ssh_args: list[str] = (), clock=time.monotonic,
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
        self.connect()

    # -- the connection -------------------------------------------------------

    def _args(self) -> str:
        args: dict[str, Any] = {"path": self.path, "offset": self.offset, "inode": self.inode, "pid": self.pid,
                                "url": self.url, "port_check": self.port_check}
        if self.launch and self.pid is None:
            args["launch"] = self.launch
            if self.snapshot:
                args["snapshot"] = self.launch
        return base64.b64encode(json.dumps(args).encode()).decode()

    def connect(self) -> None:
        bootstrap = f"import base64,sys;exec(base64.b64decode({base64.b64encode(_agent_source().encode()).decode()!r}))"
        argv = ssh_command(self.host, ["python3", "-c", bootstrap, self._args()], self.ssh_args)
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.set_blocking(self._proc.stdout.fileno(), False)
        self._buf = b""
        self.connects += 1

    def fileno(self) -> int:
        return self._proc.stdout.fileno() if self._proc is not None else -1

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
        for pipe in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            if pipe is not None:
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
            try:
                self._proc.stdin.close()  # the agent ends when its stdin does
                self._proc.wait(timeout=3)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
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
            data = self._proc.stdout.read()
        except (BlockingIOError, ValueError):
            data = None
        if data:
            self._buf += data
            *lines, self._buf = self._buf.split(b"\n")
            for line in lines:
                self._record(line, out)
        elif data == b"":  # the connection ended
            self._proc.wait()
            stderr = self._proc.stderr.read().decode(errors="replace")
            self._close_pipes()
            self._proc = None
            problem = _classify(stderr, self.host)
            if problem and not self._received_any:
                raise SSHError(problem)
            if not self.exited or self.launch:
                delay = BACKOFF[min(self._attempt, len(BACKOFF) - 1)]
                self._attempt += 1
                self._retry_at = now + delay
                out.append(("disconnected", stderr.strip().splitlines()[-1:] or ["connection closed"]))
        return out

    def _record(self, line: bytes, out: list) -> None:
        kind, _, payload = line.partition(b" ")
        self._received_any = True
        self._attempt = 0
        if kind == b"L":
            data = base64.b64decode(payload)
            self.offset += len(data)
            out.append(("log", data))
        elif kind == b"O":
            inode, offset = payload.split()
            if int(inode) != self.inode or int(offset) < self.offset:
                out.append(("reopened", None))
            self.inode, self.offset = int(inode), int(offset)
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
