"""The real two-node Slurm cluster of scripts/slurm-cluster.sh, for the tests:
found running, or installed (Debian packages, as root) and started, then
stopped by pid at the end of the session if this session started it."""

import os
import shutil
import subprocess
import time

from .conftest import ROOT

SCRIPT = ROOT / "scripts" / "slurm-cluster.sh"
PID_FILES = ("/run/slurm/slurmd-n1.pid", "/run/slurm/slurmd-n2.pid", "/run/slurm/slurmctld.pid")


def running() -> bool:
    if shutil.which("sinfo") is None:
        return False
    out = subprocess.run(["sinfo", "-h", "-o", "%D"], capture_output=True, text=True)
    return out.returncode == 0 and out.stdout.strip() == "2"


def start() -> tuple[bool, str | None]:
    """(whether this call started it, why it cannot run)."""
    if running():
        return False, None
    if os.geteuid() != 0:
        return False, "the Slurm tests need root (slurmd runs as root) or a running cluster"
    for step in ("install", "start"):
        out = subprocess.run([str(SCRIPT), step], capture_output=True, text=True)
        if out.returncode != 0:
            return False, f"scripts/slurm-cluster.sh {step} failed: {out.stderr.strip()[-300:]}"
    return True, None


def stop() -> None:
    subprocess.run([str(SCRIPT), "stop"], check=True)


def slurmd_pid(node: str) -> int:
    with open(f"/run/slurm/slurmd-{node}.pid") as f:
        return int(f.read())


def restart_slurmd(node: str) -> None:
    """Bring a killed node back (ReturnToService=2 lets it rejoin) and wait until it takes jobs again
    (idle, or mixed/allocated when other jobs already run there)."""
    subprocess.run(["/usr/sbin/slurmd", "-N", node], check=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%T"], capture_output=True, text=True).stdout
        if state.strip() in ("idle", "mixed", "allocated"):
            return
        time.sleep(0.5)
    raise RuntimeError(f"{node} did not come back: {state.strip()}")
