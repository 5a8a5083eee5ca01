"""Runs on the remote host, at the other end of firedup's one SSH connection,
under the host's own python3 (standard library only). Follows a log from a
byte offset like tail -F, reports the watched process tree's liveness and
activity, probes the server's health endpoint from the remote side, and can
launch the server (detached, so that it survives the connection) and stop it.

It is shipped as modules, not pasted text: ``ssh.agent_command`` sends this
module and the few it imports (``owners``, ``pgroup``, the environment
snapshot), compressed, on the ssh command line; a small bootstrap imports them
from there on the host and calls ``main``.

Output: one record a line, "<kind> <payload>":
  O <inode> <offset>     the log is open at this inode, data follows from offset
  N                      the log does not exist yet: followed from when it appears
  L <base64>             log bytes
  P <json>               process tree sample (pids, commands, rss, read, write, gpu)
  X <code>               the process ended (-255: not our child, status unknown)
  H <json>               health probe result {"status": 200 | null, "owner": tree|foreign|unknown, "holder"}
  S <pid>                the server this agent launched
  W <json>               the log's writer, found when no pid was given {"pid", "command"} ({} for none)
  B <json>               not launched: the port is taken {"port", "holders": [...]}
  V <json>               the environment snapshot (firedup.ledger.environment runs first)
  E <message>            an error firedup should report
  T                      heartbeat (every 2 s)
Input: "K <grace>" stops the launched (or watched) process group.

Stop mode ({"stop": pgid, "grace": s}, for ``firedup stop``): stops that
process group and prints how it ended (gone, terminated, killed).

Hub mode ({"hub": true}: a Slurm job through its login node) carries the
scheduler's commands and every log of the job on the same connection.
Input:
  F <i> <json>           follow log i {"path", "offset", "inode"} (again after a reconnect)
  U <i> <url>            probe this health URL for log i (the head node's, known once the job runs)
  C <n> <json>           run command n {"argv", "stdin", "timeout"} in a thread
Output: O, L, E and H as above, tagged "<kind> <i> <payload>"; T; and
  R <n> <json>           command n ended {"rc": int | null (timed out), "stdout", "stderr"}
"""

from __future__ import annotations

import base64
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from ..ledger.environment import snapshot
from .file import keep_previous
from .owners import command_of, listeners, listening_inodes, ownership, tree, writers
from .pgroup import stop_group

POLL = 0.02
CHUNK = 1 << 20


_out = threading.Lock()  # hub mode: commands answer from their own threads


def emit(kind, payload=b"", tag=None):
    if isinstance(payload, str):
        payload = payload.encode()
    head = kind if tag is None else f"{kind} {tag}"
    with _out:
        sys.stdout.buffer.write(head.encode() + b" " + payload + b"\n")
        sys.stdout.buffer.flush()


class Tail:
    """A log followed like tail -F from a byte offset: a rotation is read from
    its start, a truncation from 0."""

    def __init__(self, path, offset=0, inode=None, tag=None):
        self.path, self.offset, self.inode, self.tag = path, offset, inode, tag
        self.f = None

    def open(self):
        """The log's stat once opened (O sent); None while it does not exist.
        OSError: it cannot be read."""
        try:
            self.f = open(self.path, "rb")
        except FileNotFoundError:
            return None
        st = os.fstat(self.f.fileno())
        if self.inode is not None and st.st_ino != self.inode:
            self.offset = 0  # rotated while we were away: the new file from its start
        self.inode = st.st_ino
        self.f.seek(min(self.offset, st.st_size))
        self.offset = self.f.tell()
        emit("O", f"{self.inode} {self.offset}", self.tag)
        return st

    def read(self):
        """Send what was appended; notice a rotation (reopened next time) or a truncation."""
        while True:
            data = self.f.read(CHUNK)
            if not data:
                break
            self.offset += len(data)
            emit("L", base64.b64encode(data), self.tag)
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return
        if st.st_ino != self.inode:
            self.f.close()
            self.f, self.offset = None, 0
        elif st.st_size < self.offset:
            self.f.seek(0)
            self.offset = 0
            emit("O", f"{self.inode} 0", self.tag)


def sample(pid):
    rss = read = write = 0
    pids = tree(pid)
    commands = set()
    for p in pids:
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                commands.add(f.read().rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace"))
            with open(f"/proc/{p}/statm") as f:
                rss += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{p}/io") as f:
                io = dict(line.split(": ") for line in f.read().splitlines())
                read += int(io.get("rchar", 0))
                write += int(io.get("wchar", 0))
        except (OSError, ValueError):
            continue
    return {"pids": sorted(pids), "commands": sorted(commands), "rss": rss, "read": read, "write": write,
            "gpu": gpu_memory(set(pids))}


def gpu_memory(pids):
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    used = 0
    for line in out.splitlines():
        try:
            p, mib = (int(x) for x in line.split(","))
        except ValueError:
            continue
        if p in pids:
            used += mib << 20
    return used


def ended(pid, child):
    if child is not None:
        return child.poll()
    try:
        with open(f"/proc/{pid}/stat") as f:
            return -255 if f.read().rsplit(")", 1)[1].split()[0] == "Z" else None
    except OSError:
        return -255


def probe(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, ValueError):
        return None


def port_of(url):
    """The URL's port and the IP address its host names (None, None if unknown)."""
    try:
        parts = urllib.parse.urlsplit(url)
        return parts.port, socket.getaddrinfo(parts.hostname, None)[0][4][0].split("%")[0]
    except (ValueError, OSError, IndexError, TypeError):
        return None, None


def find_writer(path, report):
    """The outermost process writing the log, reported to firedup (a W record);
    a search that finds none is reported only when ``report``."""
    found = writers(path)
    pid = found[0] if found else None
    if pid or report:
        emit("W", json.dumps({"pid": pid, "command": command_of(pid)} if pid else {}))
    return pid


def run_command(n, request):
    try:
        out = subprocess.run(request["argv"], input=request.get("stdin"), capture_output=True, text=True,
                             timeout=request.get("timeout"), cwd=os.path.expanduser("~"))
        reply = {"rc": out.returncode, "stdout": out.stdout, "stderr": out.stderr}
    except subprocess.TimeoutExpired:
        reply = {"rc": None, "stdout": "", "stderr": ""}
    except OSError as e:  # not installed here: as a shell says it
        reply = {"rc": 127, "stdout": "", "stderr": f"{request['argv'][0]}: {e.strerror}"}
    emit("R", json.dumps(reply), n)


def hub():
    """Commands run and logs followed for firedup, until its stdin ends."""
    tails, urls, last_probe, last_beat, pending = {}, {}, 0.0, 0.0, b""
    while True:
        now = time.time()
        for i, tail in list(tails.items()):
            try:
                if tail.f is None and tail.open() is None:
                    continue
            except OSError as e:
                emit("E", f"cannot read {tail.path} on this host: {e.strerror}", i)
                del tails[i]
                continue
            tail.read()
        if urls and now - last_probe >= 0.5:
            last_probe = now
            for i, url in urls.items():
                emit("H", json.dumps({"status": probe(url)}), i)
        if now - last_beat >= 2.0:
            last_beat = now
            emit("T")
        readable, _, _ = select.select([sys.stdin], [], [], POLL)
        if not readable:
            continue
        # Read the descriptor itself: sys.stdin's buffer would keep lines select() cannot see.
        data = os.read(sys.stdin.fileno(), CHUNK)
        if not data:
            return 0
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            kind, tag, payload = (line.decode().split(" ", 2) + ["", ""])[:3]
            if kind == "F":
                spec = json.loads(payload)
                tails[tag] = Tail(os.path.expanduser(spec["path"]), spec.get("offset", 0), spec.get("inode"), tag)
            elif kind == "U":
                urls[tag] = payload
            elif kind == "C":
                threading.Thread(target=run_command, args=(tag, json.loads(payload)), daemon=True).start()


def main(encoded: str) -> int:
    """Run as the base64 JSON arguments ``encoded`` say; the exit status."""
    args = json.loads(base64.b64decode(encoded))
    if args.get("hub"):
        return hub()
    if args.get("stop"):
        print(stop_group(args["stop"], args["grace"]), flush=True)
        return 0
    path = os.path.expanduser(args["path"])  # ~/...: launch --host's logs
    pid, child = args.get("pid"), None
    if args.get("snapshot"):
        emit("V", json.dumps(snapshot(args["snapshot"])))
    port, address = port_of(args["url"]) if args.get("url") else (None, None)
    before, owners_seen = None, {}
    if args.get("launch"):
        holders = listeners(port, address) if port else []
        if holders and args.get("port_check", True):
            emit("B", json.dumps({"port": port, "holders": [h.describe() for h in holders]}))
            return 0
        before = {h.inode for h in holders}
        os.makedirs(os.path.dirname(path), exist_ok=True)
        keep_previous(path)  # as a local launch: a fresh log, the one before is NAME.1.log
        with open(path, "ab") as log:
            try:
                child = subprocess.Popen(args["launch"], stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         cwd=os.path.expanduser("~"))
            except OSError as e:  # not found, not executable: trying again will not help
                emit("E", f"cannot start {args['launch'][0]} on this host: {e.strerror}")
                return 2
        pid = child.pid
        emit("S", str(pid))
    elif pid and args.get("first") and ended(pid, None) is not None:  # a mistyped --pid (later: it ended)
        emit("E", f"no process {pid} on this host")
        return 2
    tail = Tail(path, args.get("offset", 0), args.get("inode"))
    last_sample, last_probe, last_beat, empty, missing = 0.0, 0.0, 0.0, False, False
    exit_code = None
    while True:
        now = time.time()
        if tail.f is None:
            try:
                st = tail.open()
            except OSError as e:  # permission denied, a directory, ...
                emit("E", f"cannot read {path} on this host: {e.strerror}")
                return 2
            if st is not None and not pid and not args.get("launch"):
                pid = find_writer(path, report=True)
                empty = st.st_size == 0
            elif st is None and not missing:
                missing = True
                emit("N")
        if tail.f is not None:
            tail.read()
        if not pid and empty and tail.offset > 0:  # a server started with "> log" after the agent opened it
            empty = False
            pid = find_writer(path, report=False)
        if pid and exit_code is None and now - last_sample >= 1.0:
            last_sample = now
            emit("P", json.dumps(sample(pid)))
        if pid and exit_code is None:
            exit_code = ended(pid, child)
            if exit_code is not None:
                if tail.f is not None:
                    tail.read()
                emit("X", str(exit_code))
        if args.get("url") and now - last_probe >= 0.5:
            last_probe = now
            result = {"status": probe(args["url"])}
            if result["status"] is not None and port:
                key = frozenset(listening_inodes(port, address))
                if key not in owners_seen:  # the fds of every process are read once per set of sockets
                    owner, holders = ownership(port, pid, before, address)
                    owners_seen[key] = {"owner": owner, "holder": ", ".join(h.describe() for h in holders) or None}
                result.update(owners_seen[key])
            emit("H", json.dumps(result))
        if now - last_beat >= 2.0:
            last_beat = now
            emit("T")
        readable, _, _ = select.select([sys.stdin], [], [], POLL)
        if readable:
            command = sys.stdin.readline()
            if not command:
                return 0  # firedup went away; a launched server stays
            if command.startswith("K") and pid:
                stop_group(pid, float(command.split()[1]), reap=child.poll if child is not None else None)
