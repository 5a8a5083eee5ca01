"""The wheel alone: built with `python -m build`, installed into a new venv
outside the repository, it answers --version, diagnoses a log with the rule
packs it carries, and launches a small server to ready."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import firedup

from .conftest import FIXTURES, ROOT

pytestmark = pytest.mark.wheel

SERVER = ("import time; print('[2025-04-09 05:05:03] server_args=ServerArgs(model_path=\"m\")'); "
          "print('[2025-04-09 05:05:21] The server is fired up and ready to roll!', flush=True); time.sleep(60)")


def test_the_wheel_installed_alone_reports_its_version_diagnoses_and_launches(tmp_path):
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", tmp_path / "dist", ROOT],
                   check=True, capture_output=True, timeout=300)
    [wheel] = (tmp_path / "dist").glob("firedup-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=120)
    subprocess.run([venv / "bin" / "pip", "install", "-q", wheel], check=True, capture_output=True, timeout=300)

    # Run from a folder that holds no source, with nothing on PYTHONPATH, so only the wheel can answer.
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"NO_COLOR": "1"}

    def firedup_cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([venv / "bin" / "firedup", *args], cwd=work, env=env,
                              capture_output=True, text=True, timeout=60)

    where = subprocess.run([venv / "bin" / "python", "-c", "import firedup; print(firedup.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True).stdout
    assert Path(where).is_relative_to(venv)

    assert firedup_cli("--version").stdout.strip() == f"firedup {firedup.__version__}"

    log = shutil.copy(FIXTURES / "captured" / "vllm-truncated-shard.log", work)
    proc = firedup_cli("diagnose", "--json", str(log))
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["outcome"] == "failed"

    proc = firedup_cli("launch", "--name", "alone", "--stall", "30", "--", sys.executable, "-c", SERVER)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "ready" in proc.stdout
    finally:
        assert firedup_cli("stop", "alone").returncode == 0
