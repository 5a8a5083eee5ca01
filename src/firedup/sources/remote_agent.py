"""Runs on the remote host, at the other end of firedup's one SSH connection,
under the host's own python3 (standard library only). Follows a log from a
byte offset like tail -F, reports the watched process tree's liveness and
activity, probes the server's health endpoint from the remote side, and can
launch the server (detached, so that it survives the connection) and stop it.

Output: one record a line, "<kind> <payload>":
  O <inode> <offset>     the log is open at this inode, data follows from offset
  L <base64>             log bytes
  P <json>               process tree sample (pids, rss, read, write, gpu)
  X <code>               the process ended (-255: not our child, status unknown)
  H <json>               health probe result {"status": 200 | null, "owner": tree|foreign|unknown, "holder"}
  S <pid>                the server this agent launched
  W <json>               the log's writer, found when no pid was given {"pid", "command"} ({} for none)
  B <json>               not launched: the port is taken {"port", "holders": [...]}
  V <json>               the environment snapshot (firedup.ledger.environment runs first)
  E <message>            an error firedup should report
  T                      heartbeat (every 2 s)
Input: "K <grace>" stops the launched (or watched) process group.
"""

import base64
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

POLL = 0.02
CHUNK = 1 << 20


def emit(kind, payload=b""):
    if isinstance(payload, str):
        payload = payload.encode()
    sys.stdout.buffer.write(kind.encode() + b" " + payload + b"\n")
    sys.stdout.buffer.flush()


def sample(pid):
    rss = read = write = 0
    pids = tree(pid)
    for p in pids:
        try:
            with open(f"/proc/{p}/statm") as f:
                rss += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{p}/io") as f:
                io = dict(line.split(": ") for line in f.read().splitlines())
                read += int(io.get("rchar", 0))
                write += int(io.get("wchar", 0))
        except (OSError, ValueError):
            continue
    return {"pids": sorted(pids), "rss": rss, "read": read, "write": write, "gpu": gpu_memory(set(pids))}


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
    found = writers(path)  # noqa: F821 - owners.py is sent before this file
    pid = found[0] if found else None
    if pid or report:
        emit("W", json.dumps({"pid": pid, "command": command_of(pid)} if pid else {}))  # noqa: F821
    return pid


def stop(pgid, grace):
    try:
        os.killpg(pgid, signal.SIGTERM)
        deadline = time.time() + grace
        while time.time() < deadline:
            os.killpg(pgid, 0)
            time.sleep(0.05)
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main():
    args = json.loads(base64.b64decode(sys.argv[1]))
    path, offset, inode = args.get("path"), args.get("offset", 0), args.get("inode")
    pid, child = args.get("pid"), None
    if args.get("snapshot"):
        emit("V", json.dumps(snapshot(args["snapshot"])))  # noqa: F821 - defined by environment.py, sent first
    port, address = port_of(args["url"]) if args.get("url") else (None, None)
    before, owners_seen = None, {}
    if args.get("launch"):
        holders = listeners(port, address) if port else []  # noqa: F821 - owners.py is sent before this file
        if holders and args.get("port_check", True):
            emit("B", json.dumps({"port": port, "holders": [h.describe() for h in holders]}))
            return 0
        before = {h.inode for h in holders}
        path = os.path.expanduser(path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "ab") as log:
            child = subprocess.Popen(args["launch"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True, cwd=os.path.expanduser("~"))
        pid = child.pid
        emit("S", str(pid))
    f, last_sample, last_probe, last_beat, empty = None, 0.0, 0.0, 0.0, False
    exit_code = None
    while True:
        now = time.time()
        if f is None:
            try:
                f = open(path, "rb")
                st = os.fstat(f.fileno())
                if inode is not None and st.st_ino != inode:
                    offset = 0  # rotated while we were away: the new file from its start
                inode = st.st_ino
                f.seek(min(offset, st.st_size))
                offset = f.tell()
                emit("O", f"{inode} {offset}")
                if not pid and not args.get("launch"):
                    pid = find_writer(path, report=True)
                    empty = st.st_size == 0
            except FileNotFoundError:
                pass
            except OSError as e:  # permission denied, a directory, ...
                emit("E", f"cannot read {path} on this host: {e.strerror}")
                return 2
        if f is not None:
            while True:
                data = f.read(CHUNK)
                if not data:
                    break
                offset += len(data)
                emit("L", base64.b64encode(data))
            try:
                st = os.stat(path)
                if st.st_ino != inode:
                    f.close()
                    f, offset = None, 0
                    continue
                if st.st_size < offset:
                    f.seek(0)
                    offset = 0
                    emit("O", f"{inode} 0")
            except FileNotFoundError:
                pass
        if not pid and empty and offset > 0:  # a server started with "> log" after the agent opened it
            empty = False
            pid = find_writer(path, report=False)
        if pid and exit_code is None and now - last_sample >= 1.0:
            last_sample = now
            emit("P", json.dumps(sample(pid)))
        if pid and exit_code is None:
            exit_code = ended(pid, child)
            if exit_code is not None:
                if f is not None:
                    data = f.read()
                    if data:
                        emit("L", base64.b64encode(data))
                emit("X", str(exit_code))
        if args.get("url") and now - last_probe >= 0.5:
            last_probe = now
            result = {"status": probe(args["url"])}
            if result["status"] is not None and port:
                key = frozenset(listening_inodes(port, address))  # noqa: F821 - owners.py is sent before this file
                if key not in owners_seen:  # the fds of every process are read once per set of sockets
                    owner, holders = ownership(port, pid, before, address)  # noqa: F821
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
                stop(pid, float(command.split()[1]))


sys.exit(main())
