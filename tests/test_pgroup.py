"""One SIGTERM → SIGKILL loop for every stop (sources/pgroup.py), here and, through
the remote agent's modules shipped over ssh, on a remote host."""

import base64
import json
import subprocess
import sys
import time

from firedup.sources import ssh
from firedup.sources.pgroup import group_alive, stop_group


def _group(*argv: str) -> subprocess.Popen:
    return subprocess.Popen(list(argv), start_new_session=True)


def test_terminated_then_gone():
    proc = _group("sleep", "30")
    assert group_alive(proc.pid)
    assert stop_group(proc.pid, 5, proc.poll) == "terminated"
    assert not group_alive(proc.pid)
    assert stop_group(proc.pid, 5, proc.poll) == "gone"


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace():
    proc = _group(sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                        "print('up', flush=True); time.sleep(30)")
    time.sleep(0.5)  # its handler is set
    assert stop_group(proc.pid, 0.3, proc.poll) == "killed"
    assert proc.wait(5) == -9


def test_the_agent_runs_from_its_shipped_modules():
    """The bootstrap imports the agent's modules from the command line alone (no
    file on the host): here its stop mode, as firedup stop runs it over ssh."""
    proc = _group("sleep", "30")
    args = base64.b64encode(json.dumps({"stop": proc.pid, "grace": 5}).encode()).decode()
    out = subprocess.run(["python3", "-I", "-c", ssh._BOOTSTRAP, ssh._agent_sources(), args], capture_output=True,
                         text=True, timeout=30, cwd="/")
    proc.wait(5)
    assert (out.returncode, out.stdout, out.stderr) == (0, "terminated\n", "")
