"""A throw-away OpenSSH server on 127.0.0.1 for the remote tests: its own host
key, a user key, known_hosts and a client config that FIREDUP_SSH_ARGS points to."""

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sshd:
    def __init__(self, root: Path):
        self.root = root
        self.port = free_port()
        self.config = root / "ssh_config"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Sshd":
        r = self.root
        for key in ("host_key", "user_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(r / key)], check=True)
        (r / "authorized_keys").write_text((r / "user_key.pub").read_text())
        host_pub = (r / "host_key.pub").read_text().split()[:2]
        (r / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {' '.join(host_pub)}\n")
        (r / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {r / 'host_key'}\n"
            f"AuthorizedKeysFile {r / 'authorized_keys'}\nPidFile {r / 'sshd.pid'}\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
            "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nMaxStartups 100\nMaxSessions 100\n"
            "LogLevel ERROR\n")
        user = os.environ.get("USER") or "root"
        self.config.write_text(
            f"Host testhost\n  HostName 127.0.0.1\n  Port {self.port}\n  User {user}\n"
            f"  IdentityFile {r / 'user_key'}\n  IdentitiesOnly yes\n  UserKnownHostsFile {r / 'known_hosts'}\n"
            "  StrictHostKeyChecking yes\n  LogLevel ERROR\n")
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation directory
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(r / "sshd_config")],
                                     stderr=open(r / "sshd.log", "wb"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"sshd did not start: {(r / 'sshd.log').read_text()}")

    def children(self) -> list[int]:
        """sshd's per-connection processes."""
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait()
