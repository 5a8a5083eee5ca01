"""``launch``: start a server detached, follow it to a verdict, and keep,
stop or hand it over accordingly."""

from __future__ import annotations

import errno
import os
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import psutil

from . import _url, registry, rules
from ._exceptions import InputError, SSHError
from ._outcome import Outcome
from .defaults import GRACE, STALL, STOP_GRACE
from .judge import Verdict
from .ledger import environment
from .ledger.memory import Memory
from .ledger.store import Ledger
from .sinks import Sink
from .sources import owners, pgroup, process, ssh
from .sources.file import FileFollower, keep_previous
from .sources.http import address_of, is_local
from .sources.process import ExitWatch
from .watch import Watch

_LOCAL = {"", "0.0.0.0", "::", "[::]", "localhost"}


def _flag(argv: Sequence[str], *names: str) -> str | None:
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


_SHELLS = {"bash", "sh", "dash", "zsh", "ksh"}


def _shell_words(argv: Sequence[str]) -> list[str]:
    """The words of the command a shell is given to run (``bash -c "exec vllm
    serve m --port 8001"``), where the server's own flags are; else ``argv``."""
    if argv and os.path.basename(argv[0]) in _SHELLS:
        for i, arg in enumerate(argv[1:-1], 1):
            if re.fullmatch(r"-[a-z]*c[a-z]*", arg):
                try:
                    return shlex.split(argv[i + 1])
                except ValueError:  # unbalanced quotes: the shell will say so
                    break
    return list(argv)


def derive_url(argv: Sequence[str], family: str | None) -> str | None:
    """The server's base URL from its own --host/--port (also inside a shell's
    ``-c`` command), or the family's default port."""
    words = _shell_words(argv)
    port = _flag(words, "--port", "-p") if family != "llamacpp" else _flag(words, "--port")
    if words != list(argv) and port is not None and not port.isdigit():
        port = None  # another of the script's commands' flag ("mkdir -p /x && vllm serve m"), or "$PORT"
    argv = words
    if port is None and family is not None:
        default = rules.load().packs[family].default_port
        port = str(default) if default else None
    if port is None or not port.isdigit():
        return None
    host = _flag(argv, "--host", "--hostname") or "127.0.0.1"
    if host in _LOCAL:
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


class _Background:
    """A call run in a thread beside the watch (the environment snapshot
    starts the server's interpreter: it must not delay the start-up)."""

    def __init__(self, fn, *args):
        self._value = None
        self._thread = threading.Thread(target=self._run, args=(fn, *args), daemon=True)
        self._thread.start()

    def _run(self, fn, *args) -> None:
        self._value = fn(*args)

    def result(self, timeout: float = environment.SNAPSHOT_TIMEOUT):
        self._thread.join(timeout)
        return self._value


@dataclass
class Launched:
    record: registry.Record
    popen: subprocess.Popen | None  # None: not started here (its port was taken; on another host)
    verdict: Verdict
    note: str | None = None
    offset: int = 0  # how far into the log the watch read

    @property
    def pgid(self) -> int:
        return self.record.pid  # start_new_session: the server leads its own group

    def stop(self, grace: float = STOP_GRACE) -> str | None:
        """Stop what is left of the server's process group (None: nothing ran)."""
        if self.popen is None or not pgroup.group_alive(self.pgid):
            return None
        return pgroup.stop_group(self.pgid, grace, self.popen.poll)


def attach(launched: Launched, out: BinaryIO) -> tuple[int, str | None]:
    """Stream the log of a ready server to ``out`` until it exits: (0 or 1 as
    it exited, None); Ctrl-C stops it: (0, how it stopped)."""
    assert launched.popen is not None
    follower = FileFollower(launched.record.log, launched.offset)
    try:
        while True:
            running = launched.popen.poll() is None
            while data := follower.read():
                out.write(data)
                out.flush()
            if not running:
                break
            time.sleep(0.2)
    except KeyboardInterrupt:
        return 0, pgroup.stop_group(launched.pgid, STOP_GRACE, launched.popen.poll)
    return (0 if launched.popen.returncode == 0 else 1), None


def port_of(url: str | None) -> int | None:
    """The TCP port of a local URL, None for another host's."""
    if not url:
        return None
    parts, host = _url.split(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return port if is_local(host) else None


def held_by(holder: owners.Holder) -> tuple[str, str | None]:
    """The holder of a port, by its firedup run name when it is one of ours,
    and how to stop it (None: its process is not visible to this user)."""
    if holder.pid is None:
        return holder.describe(), None
    lineage = owners.lineage(holder.pid)
    for run in registry.records():
        if run.pid in lineage and run.alive():
            return f"{holder.describe()}, firedup run {run.name!r}", f"firedup stop {run.name}"
    return holder.describe(), f"kill {holder.pid}"


def port_taken(port: int, holders: Sequence[tuple[str, str | None]], family: str | None) -> Verdict:
    """The verdict on a start refused because someone already listens on its
    port: ``holders``, each described and how to stop it (None: not known)."""
    rule = rules.load().rule("port-in-use")  # the server's own port, not a library's (HCCL's)
    who = "; ".join(described for described, _ in holders)
    stops = [stop for _, stop in holders if stop]
    stop = f"Stop what holds it ({', '.join(stops)})" if stops else "Stop what holds it (named above)"
    return Verdict(
        outcome=Outcome.FAILED, cause="port_in_use", server=family, phase=None,
        evidence={"line": f"port {port} is already listened on by {who}", "lineno": None},
        explanation=f"Port {port} is taken before the server starts: it could not bind it, and a health check would "
                    f"reach the server already there. {rule.explanation}",
        remedy=f"{stop}, or start this one with another --port. --port-check off starts it anyway.",
    )


def _decided(verdict: Verdict | None) -> Verdict:
    assert verdict is not None  # a watch without a cancel event always decides
    return verdict


def start_and_watch(argv: Sequence[str], *, name: str | None = None, server: str | None = None,
                    log: str | os.PathLike | None = None, url: str | None = None, stall: float | None = STALL,
                    timeout: float | None = None, grace: float = GRACE, kill_on_stall: bool = False,
                    env: Mapping[str, str] | None = None, sinks: Sequence[Sink] = (),
                    stop_grace: float = STOP_GRACE, probe_generate: bool = False,
                    ledger: Ledger | None = None, port_check: bool = True) -> Launched:
    """Start ``argv`` detached, watch it to a verdict, and stop it unless it is
    ready (or stalled, which is left running for inspection unless asked).

    Its port is checked first: a port someone listens on fails the start at
    once (``port_check=False`` starts it anyway; a health answer from the
    socket that was there before still never counts as this server's)."""
    argv = list(argv)
    family = server or rules.load().detect_command(argv)
    name = name or registry.default_name(argv, family)
    try:
        running = registry.load(name).alive() is True
    except InputError:  # none of that name, or an unreadable record
        running = False
    if running:
        raise InputError(f"a server named {name!r} is still running (firedup stop {name})")
    log_path = Path(log) if log else registry.state_dir() / "logs" / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    url = url or derive_url(argv, family)
    if probe_generate and not url:
        raise InputError("--probe-generate needs the server's base URL: pass --url (the command has no --port, "
                         "and its family no default port)")
    memory = Memory(ledger, family, argv) if ledger is not None else None
    port = port_of(url)
    # Only a socket on the address the server binds (or a wildcard) is in its way.
    holders = owners.listeners(port, address_of(_flag(_shell_words(argv), "--host", "--hostname"))) if port else []
    if port and holders and port_check:
        verdict = port_taken(port, [held_by(h) for h in holders], family)
        if memory is not None:
            verdict = memory.remember(verdict, kind="launch", name=name, log=str(log_path), environment=None)
        run = registry.Record(name=name, pid=0, argv=argv, log=str(log_path), url=url, server=family,
                       started=time.time(), created=0.0)
        return Launched(run, None, verdict, "nothing was started")
    keep_previous(log_path)  # each start on a fresh log; the one before is NAME.1.log
    try:
        popen = process.start(argv, log_path, env=env)
    except (FileNotFoundError, PermissionError) as e:  # not there, or not executable
        # NAME=VALUE CMD is a shell's way; firedup starts the command itself, with no shell
        hint = f" (to set a variable: env {argv[0]} CMD ...)" if "=" in argv[0] and e.errno == errno.ENOENT else ""
        raise InputError(f"cannot start {argv[0]}: {e.strerror}{hint}") from None
    snapshot = _Background(environment.snapshot, argv, env if env is not None else os.environ)
    try:
        created = psutil.Process(popen.pid).create_time()
    except psutil.Error:
        created = 0.0
    run = registry.Record(name=name, pid=popen.pid, argv=argv, log=str(log_path), url=url, server=family,
                   started=time.time(), created=created)
    run.save()
    watch = Watch(log=str(log_path), server=family, exit_watch=ExitWatch(popen.pid, popen),
                  url=url, stall=stall, timeout=timeout, grace=grace, sinks=sinks, probe_generate=probe_generate,
                  stall_for=memory.stall_for(stall) if memory else None,
                  expect=memory.expectation() if memory else None, listening_before={h.inode for h in holders})
    try:
        verdict = _decided(watch.run())
    except BaseException as e:  # Ctrl-C, SIGTERM, or firedup itself failing: no orphans holding GPUs
        how = pgroup.stop_group(popen.pid, stop_grace, popen.poll)
        e.add_note(f"stopped the server's process group ({how}), log {log_path}")
        raise
    if memory is not None:
        verdict = memory.remember(verdict, kind="launch", name=name, log=str(log_path),
                                  environment=snapshot.result())
    note = None
    if verdict.outcome == "ready" and popen.poll() is not None:
        # a script around an offline engine that finished once its engine was up
        note = f"exited with status {popen.returncode} once ready; log {log_path}"
    elif verdict.outcome == "ready":
        note = (f"running: pid {popen.pid}, log {log_path}; follow it with: tail -f {log_path}; "
                f"stop it with: firedup stop {name}")
    elif verdict.outcome == "stalled" and not kill_on_stall:
        note = (f"left running for inspection: pid {popen.pid}, log {log_path}; "
                f"stop it with: firedup stop {name}")
    elif pgroup.group_alive(popen.pid):
        how = pgroup.stop_group(popen.pid, stop_grace, popen.poll)
        note = f"stopped the server's process group ({how})"
    assert watch.follower is not None
    return Launched(run, popen, verdict, note, watch.follower.offset)


def start_remote(host: ssh.Host, argv: Sequence[str], *, name: str | None = None, server: str | None = None,
                 url: str | None = None, stall: float | None = STALL, timeout: float | None = None,
                 grace: float = GRACE, kill_on_stall: bool = False, sinks: Sequence[Sink] = (),
                 stop_grace: float = STOP_GRACE, ssh_args: Sequence[str] = (),
                 ledger: Ledger | None = None, port_check: bool = True) -> Launched:
    """Start ``argv`` on ``host`` with setsid and its output in a remote log, so
    that it survives the SSH connection; watch it over that one connection."""
    argv = list(argv)
    family = server or rules.load().detect_command(argv)
    name = name or registry.default_name(argv, family)
    log = f"{ssh.REMOTE_STATE}/logs/{name}.log"
    url = url or derive_url(argv, family)
    health = rules.load().packs[family].health if family else "/health"
    remote = ssh.RemoteSource(host, log, launch=argv, url=f"{url}{health}" if url else None, ssh_args=list(ssh_args),
                              snapshot=True, port_check=port_check)
    memory = Memory(ledger, family, argv, str(host)) if ledger is not None else None
    watch = Watch(remote=remote, server=family, stall=stall, timeout=timeout, grace=grace, sinks=sinks,
                  stall_for=memory.stall_for(stall) if memory else None,
                  expect=memory.expectation() if memory else None)
    try:
        verdict = _decided(watch.run())
    except ssh.PortTaken as taken:
        remote.close()
        verdict = port_taken(taken.port, [(h, None) for h in taken.holders], family)
        if memory is not None:
            verdict = memory.remember(verdict, kind="launch", name=name, log=f"ssh://{host}/{log}", environment=None)
        run = registry.Record(name=name, pid=0, argv=argv, log=log, url=url, server=family, started=time.time(),
                       created=0.0, host=str(host))
        return Launched(run, None, verdict, f"nothing was started on {host}")
    except BaseException:
        remote.stop_server(stop_grace)
        remote.close()
        raise
    run = registry.Record(name=name, pid=remote.pid or 0, argv=argv, log=log, url=url, server=family,
                   started=time.time(), created=0.0, host=str(host))
    if remote.pid is None:  # the agent never said it started the server: there is nothing to stop
        remote.close()
        if memory is not None:
            verdict = memory.remember(verdict, kind="launch", name=name, log=f"ssh://{host}/{log}", environment=None)
        return Launched(run, None, verdict, f"nothing was started on {host}")
    run.save()
    if memory is not None:
        verdict = memory.remember(verdict, kind="launch", name=name, log=f"ssh://{host}/{log}",
                                  environment=watch.environment)
    if verdict.outcome == "ready" or (verdict.outcome == "stalled" and not kill_on_stall):
        remote.disconnect()
        state = "running" if verdict.outcome == "ready" else "left running for inspection"
        note = f"{state} on {host}: pid {remote.pid}, log {log}; stop it with: firedup stop {name}"
    else:
        remote.stop_server(stop_grace)
        deadline = time.monotonic() + stop_grace + 5
        while not remote.exited and remote.connected and time.monotonic() < deadline:
            remote.events()
            time.sleep(0.05)
        remote.close()
        run.stopped = time.time()
        run.save()
        note = f"stopped the server's process group on {host}"
    return Launched(run, None, verdict, note)


def stop_remote(run: registry.Record, grace: float, ssh_args: Sequence[str] = ()) -> str:
    """SIGTERM, then SIGKILL after ``grace``, the remote server's process group
    (by the agent, over one SSH connection): gone, terminated or killed."""
    assert run.host is not None
    argv = ssh.agent_command(ssh.Host.parse(run.host), {"stop": run.pid, "grace": grace}, ssh_args)
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        raise SSHError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"ssh exited {out.returncode}")
    return out.stdout.strip()
