"""The run ledger: safe under concurrent writers and SIGKILL, migrated forward,
refusing foreign files, redacting secrets; runs, show and diff."""

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import replace

import pytest

from firedup.ledger import environment, history
from firedup.ledger.store import APPLICATION_ID, MIGRATIONS, Ledger, LedgerError

from .conftest import run_cli, zero_server

WRITER = """
import sys, time
sys.path.insert(0, {src!r})
from firedup.ledger.store import Ledger
ledger = Ledger(sys.argv[1])
for i in range(int(sys.argv[3])):
    run_id = ledger.record(kind="launch", name=f"{{sys.argv[2]}}-{{i}}", outcome="ready", command=["x"],
                           config={{"i": i, "pad": "x" * 2000}}, phases={{"weights": 1.0}})
    print(run_id, flush=True)
"""


def writer(tmp_path, path, tag, count):
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(src=os.path.join(os.path.dirname(__file__), "..", "src")))
    return subprocess.Popen([sys.executable, str(script), str(path), tag, str(count)], stdout=subprocess.PIPE,
                            text=True)


def test_two_writers_at_once_lose_nothing(tmp_path):
    path = tmp_path / "ledger.db"
    procs = [writer(tmp_path, path, tag, 300) for tag in ("a", "b")]
    ids = [line for p in procs for line in p.communicate()[0].split()]
    assert all(p.returncode == 0 for p in procs)
    with Ledger(path) as ledger:
        names = {r["name"] for r in ledger.find()}
        assert ledger.integrity() == "ok"
    assert len(ids) == 600 and names == {f"{t}-{i}" for t in "ab" for i in range(300)}


def test_a_new_ledger_waits_for_another_writer_before_its_switch_to_wal(tmp_path, monkeypatch):
    # The race a dozen watches starting together lose now and then: another
    # process takes the write lock between this one's schema and its switch to
    # WAL, where SQLite says "locked" at once instead of waiting.
    path = tmp_path / "ledger.db"
    migrate = Ledger._check_and_migrate
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    def migrate_then_the_other_writes(self):
        migrate(self)
        other.execute("BEGIN IMMEDIATE")
        threading.Timer(0.3, other.execute, ["COMMIT"]).start()

    monkeypatch.setattr(Ledger, "_check_and_migrate", migrate_then_the_other_writes)
    with Ledger(path) as ledger:
        assert ledger.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert ledger.integrity() == "ok"
    other.close()


@pytest.mark.slow  # a writer SIGKILLed over and over
def test_sigkill_mid_write_keeps_every_committed_run(tmp_path):
    path = tmp_path / "ledger.db"
    committed = set()
    for attempt in range(25):
        proc = writer(tmp_path, path, f"k{attempt}", 100000)
        first = proc.stdout.readline()  # writing (however long the import took on a busy machine)
        time.sleep((attempt % 5) * 0.03)
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        committed |= {int(x) for x in (first + out).split()}
    with Ledger(path) as ledger:
        assert ledger.integrity() == "ok"
        present = {r["id"] for r in ledger.find()}
    assert committed and committed <= present


def test_migration_from_the_first_schema(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[0])
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute("PRAGMA user_version = 1")
    db.execute("INSERT INTO runs (kind, name, outcome, started, phases) VALUES ('launch', 'old', 'ready', 1.0, "
               "'{\"weights\": 31.0}')")
    db.commit()
    db.close()
    with Ledger(path) as ledger:
        run = ledger.find()[0]
        assert ledger.db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        ledger.record(kind="launch", outcome="ready", fingerprint="f", environment={"env": {}})
    assert run["name"] == "old" and run["phases"] == {"weights": 31.0} and run["environment"] == {}


@pytest.mark.parametrize("content", ["garbage", "other-sqlite", "newer"])
def test_a_foreign_or_corrupt_file_is_refused_and_left_alone(tmp_path, content):
    path = tmp_path / "ledger.db"
    if content == "garbage":
        path.write_bytes(os.urandom(8192))
    else:
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE notes (x)")
        if content == "newer":
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute("PRAGMA user_version = 99")
        db.commit()
        db.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(LedgerError):
        Ledger(path)
    proc = run_cli("runs", "--ledger", str(path))
    assert proc.returncode == 2 and proc.stderr.decode().count("\n") == 1
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_secrets_are_redacted_everywhere(tmp_path, monkeypatch):
    token = "hf_" + "a1B2c3D4" * 5
    key = "sk-" + "Z9y8X7w6" * 4
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("VLLM_API_KEY", "plain-but-named-like-a-key")
    monkeypatch.setenv("HF_ENDPOINT", "https://user:hunter2@mirror.example/")
    monkeypatch.setenv("TORCH_SOMETHING", key)
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    script = tmp_path / "server.py"
    script.write_text("print('[2025-04-09 05:05:21] The server is fired up and ready to roll!', flush=True)\n"
                      "import time; time.sleep(30)\n")
    proc = run_cli("launch", "--json", "--name", "secret", "--", sys.executable, str(script))
    run_cli("stop", "secret")
    assert proc.returncode == 0
    shown = run_cli("show", "1").stdout.decode() + run_cli("show", "--json", "1").stdout.decode()
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("ledger.db*"))
    for secret in (token, key, "plain-but-named-like-a-key", "hunter2"):
        assert secret not in shown and secret.encode() not in stored
        assert secret not in proc.stdout.decode()
    assert "NCCL_DEBUG=INFO" in shown and "<redacted>" in shown


def test_environment_comes_from_the_servers_own_interpreter():
    snap = environment.snapshot([sys.executable, "-m", "something"])
    assert snap["packages"]["python"] == sys.version.split()[0]
    assert "pytest" not in snap["packages"]  # only the packages that steer servers
    assert environment.interpreter(["env", "A=1", sys.executable, "-c", "x"]) == sys.executable


def test_an_env_prefix_is_the_runs_environment_not_its_arguments(monkeypatch):
    through, base = environment.through_env, {"HOME": "/h", "NCCL_DEBUG": "INFO"}
    assert through(["env", "OMP_NUM_THREADS=1", "vllm", "serve", "m"], base) == (
        ["vllm", "serve", "m"], {**base, "OMP_NUM_THREADS": "1"})
    assert through(["/usr/bin/env", "-i", "A=1", "python", "-c", "x=1"], base) == (["python", "-c", "x=1"], {"A": "1"})
    assert through(["env", "-u", "NCCL_DEBUG", "--unset=HOME", "vllm"], base) == (["vllm"], {})
    assert through(["env", "-uNCCL_DEBUG", "--", "B=2", "vllm"], base) == (["vllm"], {"HOME": "/h", "B": "2"})
    for as_is in (["env", "-S", "A=1 vllm"], ["vllm", "serve", "A=1"]):  # an option not read here; no env
        assert through(as_is, base) == (as_is, base)
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    token = "hf_" + "a1B2c3D4" * 5
    snap = environment.snapshot(["env", "-u", "NCCL_DEBUG", "OMP_NUM_THREADS=1", "FOO=bar", f"HF_TOKEN={token}",
                                 sys.executable, "-c", "x"])
    assert snap["packages"]["python"] == sys.version.split()[0]
    assert {k: snap["env"].get(k) for k in ("OMP_NUM_THREADS", "FOO", "HF_TOKEN", "NCCL_DEBUG")} == {
        "OMP_NUM_THREADS": "1", "FOO": "bar", "HF_TOKEN": "<redacted>", "NCCL_DEBUG": None}

    def run(command, env):
        return {"command": command, "server": "vllm", "version": None, "config": {}, "phases": {},
                "environment": {"packages": {}, "env": env}}

    plain = run(["vllm", "serve", "m"], {"NCCL_DEBUG": "INFO"})
    prefixed = ["env", "OMP_NUM_THREADS=1", "vllm", "serve", "m"]
    # recorded now, and before snapshots held the prefix's variables: the same change
    for other in (run(prefixed, {"NCCL_DEBUG": "INFO", "OMP_NUM_THREADS": "1"}), run(prefixed, {"NCCL_DEBUG": "INFO"})):
        assert history.diff(plain, other) == [{"section": "env", "key": "OMP_NUM_THREADS", "a": None, "b": "1"}]


def test_diff_of_a_run_with_itself_is_refused():
    proc = run_cli("diff", "3", "3")
    assert proc.returncode == 2 and proc.stderr.decode() == (
        "firedup: run 3 is named twice: diff says what changed between two runs\n")


def test_diff_of_two_benchmarks_names_what_their_workloads_asked():
    """compare refuses runs of different workloads; diff says what differs between them."""
    def bench(output_len):
        return {"command": [], "server": "llamacpp", "version": None, "config": {}, "phases": {},
                "environment": {}, "workload": {"input_len": 64, "output_len": output_len, "concurrency": 1}}

    assert history.diff(bench(64), bench(64)) == []
    assert history.diff(bench(64), bench(32)) == [{"section": "workload", "key": "output_len", "a": 64, "b": 32}]


def test_a_shells_variable_assignment_before_the_command_is_refused_with_the_way_to_set_it():
    proc = run_cli("launch", "--", "OMP_NUM_THREADS=1", sys.executable, "-c", "x")
    assert proc.returncode == 2 and proc.stderr.decode() == (
        "firedup: cannot start OMP_NUM_THREADS=1: No such file or directory "
        "(to set a variable: env OMP_NUM_THREADS=1 CMD ...)\n")


def test_fingerprint_ignores_where_the_server_listens():
    a = history.fingerprint("vllm", ["/venv/bin/python", "-m", "vllm", "--model", "m", "--port", "8000"], None)
    b = history.fingerprint("vllm", ["/other/bin/python", "-m", "vllm", "--port=9000", "--model", "m"], None)
    c = history.fingerprint("vllm", ["/venv/bin/python", "-m", "vllm", "--model", "m", "--tp", "2"], None)
    assert a == b and a != c
    elsewhere = ["/venv/bin/python", "-m", "vllm", "--model", "m", "--port", "8000"]
    assert a != history.fingerprint("vllm", elsewhere, "gpu1")


def test_runs_show_and_diff_from_the_cli(tmp_path):
    with Ledger() as ledger:
        base = dict(kind="launch", server="sglang", outcome="ready", command=["python", "-m", "sglang.launch_server"],
                    fingerprint="f")
        ledger.record(**base, name="before", version=None, config={"attention_backend": "flashinfer"},
                      phases={"weights": 31.0, "cuda_graphs": 95.0}, environment={"packages": {"torch": "2.8.0"}})
        ledger.record(**base, name="after", version=None, config={"attention_backend": "triton"},
                      phases={"weights": 612.0, "cuda_graphs": 94.0}, environment={"packages": {"torch": "2.9.1"}})
    listed = json.loads(run_cli("runs", "--json").stdout)
    assert [r["name"] for r in listed] == ["after", "before"]
    assert run_cli("runs", "--since", "1h").returncode == 0
    assert "weights" in run_cli("show", "2").stdout.decode()
    changes = json.loads(run_cli("diff", "--json", "1", "2").stdout)["changes"]
    assert {"section": "config", "key": "attention_backend", "a": "flashinfer", "b": "triton"} in changes
    assert {"section": "packages", "key": "torch", "a": "2.8.0", "b": "2.9.1"} in changes
    assert {"section": "phases", "key": "weights", "a": 31.0, "b": 612.0} in changes
    assert not any(c["key"] == "cuda_graphs" for c in changes)
    text = run_cli("diff", "1", "2").stdout.decode()
    assert "attention_backend" in text and "flashinfer" in text
    assert run_cli("show", "99").returncode == 2


def test_show_shortens_long_environment_values_and_json_keeps_them_whole():
    cuda = "cuda>=12.4 " + " ".join(f"brand=tesla,driver>={470 + i},driver<{471 + i}" for i in range(40))
    with Ledger() as ledger:
        ledger.record(kind="launch", name="big-env", outcome="ready", command=["vllm", "serve", "m"], phases={},
                      environment={"env": {"NVIDIA_REQUIRE_CUDA": cuda, "VLLM_USE_V1": "1"}})
    shown = run_cli("show", "1").stdout.decode()
    assert f"NVIDIA_REQUIRE_CUDA={cuda[:80]}… ({len(cuda)} characters) VLLM_USE_V1=1" in shown.replace("\n", "")
    assert len(cuda) > 1000 and cuda not in shown.replace("\n", "")
    assert json.loads(run_cli("show", "--json", "1").stdout)["environment"]["env"]["NVIDIA_REQUIRE_CUDA"] == cuda


def test_diagnose_record(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2\n")
    out = json.loads(run_cli("diagnose", "--json", "--record", str(log)).stdout)
    runs = json.loads(run_cli("runs", "--json").stdout)
    assert out["run_id"] == runs[0]["id"] and runs[0]["cause"] == "bad_argument" and runs[0]["kind"] == "diagnose"


def test_benchmarks_do_not_crowd_start_ups_out_of_what_is_usual(tmp_path):
    from firedup.ledger.memory import Memory

    argv = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"]
    fingerprint = history.fingerprint("vllm", argv, None)
    with Ledger(tmp_path / "l.db") as ledger:
        for weights in range(10, 10 + history.HISTORY):
            ledger.record(kind="launch", outcome="ready", fingerprint=fingerprint, phases={"weights": float(weights)})
        for _ in range(5 * history.HISTORY):  # firedup run --repeat: benchmarks carry the launch's fingerprint
            ledger.record(kind="bench", outcome="ready", fingerprint=fingerprint, phases={})
        assert Memory(ledger, "vllm", argv).usual["weights"]["n"] == history.HISTORY


def test_a_start_refused_before_the_server_ran_lists_no_changes(tmp_path):
    """Its port was taken: nothing of it is known, so nothing "changed since the
    last good run" (the last good run's snapshot and config are not "missing")."""
    from firedup._launch import port_taken
    from firedup.ledger.memory import Memory

    argv = ["transformers", "serve", "m", "--port", "18000"]
    with Ledger(tmp_path / "l.db") as ledger:
        ledger.record(kind="launch", outcome="ready", fingerprint=history.fingerprint("transformers", argv, None),
                      command=argv, config={"model": "m", "dtype": "bf16"}, environment={"python": "3.11"},
                      phases={"init": 5.0})
        memory = Memory(ledger, "transformers", argv)
        assert memory.last_good is not None
        refused = memory.remember(port_taken(18000, [("pid 1 (x)", "kill 1")], "transformers"), kind="launch", name="t",
                                  log=None, environment=None)
        assert refused.outcome == "failed" and refused.cause == "port_in_use" and refused.changes == []
        failed = Memory(ledger, "transformers", argv).remember(
            replace(refused, config={"model": "m", "dtype": "fp32"}), kind="launch", name="t", log=None,
            environment={"python": "3.11"})
        assert any("dtype" in line for line in history.change_lines(failed.changes))  # a start that ran: listed


@contextmanager
def unwritable(path):
    """``path`` (a file or a folder) made unwritable to this process: immutable for root, whom file modes
    do not stop; read-only for anyone else."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(mode & ~0o222)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    if not shutil.which("chattr") or subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("as root, only chattr +i makes a file unwritable, and it is not available here")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def one_run(path):
    with Ledger(path) as ledger:
        ledger.record(kind="launch", name="kept", outcome="ready", phases={})


@pytest.mark.parametrize("command", ["launch", "run", "watch", "diagnose", "bench"])
def test_a_ledger_that_cannot_be_written_is_refused_before_anything_starts(tmp_path, command):
    """Not a server started whose verdict then goes unsaid, nor a diagnosis dropped: one line, exit 2."""
    path, started = tmp_path / "l.db", tmp_path / "started"
    one_run(path)
    log = tmp_path / "ready.log"
    log.write_text("[2025-04-09 05:05:21] The server is fired up and ready to roll!\n")
    server = ["--", sys.executable, "-c", f"open({str(started)!r}, 'w'); import time; time.sleep(30)"]
    args = {"launch": ["launch", "--name", "x"], "run": ["run", "--name", "x"], "watch": ["watch", str(log)],
            "diagnose": ["diagnose", "--record", str(log)], "bench": ["bench", "http://127.0.0.1:9"]}[command]
    with unwritable(path):
        proc = run_cli(*args, "--ledger", str(path), *(server if command in ("launch", "run") else []))
        err = proc.stderr.decode()
        assert err == f"firedup: cannot write to the ledger {path}: attempt to write a readonly database\n", err
        assert proc.returncode == 2 and proc.stdout == b"" and not started.exists()
        kept = run_cli("runs", "--json", "--ledger", str(path))  # a read still works on it
        assert [r["name"] for r in json.loads(kept.stdout)] == ["kept"], kept.stderr


def test_a_ledger_path_that_is_a_folder_is_refused_in_one_line(tmp_path):
    """FIREDUP_LEDGER=~/.local/share/firedup, without the file's name: every command that reads or writes
    the ledger says so in one line, exit 2, and makes nothing there."""
    log = tmp_path / "ready.log"
    log.write_text("[2025-04-09 05:05:21] The server is fired up and ready to roll!\n")
    said = f"firedup: the ledger {tmp_path} is a folder: give the ledger's file (e.g. {tmp_path / 'ledger.db'})\n"
    commands = (["runs"], ["show", "1"], ["diff", "1", "2"], ["compare", "1", "2"], ["diagnose", "--record", str(log)])
    for args in commands:
        proc = run_cli(*args, "--ledger", str(tmp_path))
        assert proc.returncode == 2 and proc.stderr.decode() == said, args
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ready.log"]


def test_an_empty_ledger_path_or_a_device_is_refused_in_one_line():
    """--ledger '' names no ledger (not the default one, silently); /dev/null is no file SQLite can keep."""
    empty = run_cli("runs", "--ledger", "")
    assert empty.returncode == 2
    assert empty.stderr.decode() == "firedup: --ledger needs a path (an empty one names no ledger)\n"
    device = run_cli("runs", "--ledger", "/dev/null")
    assert device.returncode == 2
    assert device.stderr.decode() == ("firedup: the ledger /dev/null is not a file (a device, a pipe): "
                                      "give a file's path\n")


def test_a_ledger_in_a_read_only_folder_is_read_and_a_write_to_it_refused_in_one_line(tmp_path):
    """SQLite cannot make the -wal and -shm files beside it: runs, show, diff and compare read it all
    the same (read-only, or as immutable when no -wal file holds runs the main file lacks); a writer is
    refused in one line, exit 2, and nothing is made in the folder."""
    folder = tmp_path / "ledgers"
    folder.mkdir()
    path = folder / "l.db"
    with Ledger(path) as ledger:
        for name in ("a", "b"):
            ledger.record(kind="launch", name=name, outcome="ready", phases={"weights": 1.0})
    log = tmp_path / "ready.log"
    log.write_text("[2025-04-09 05:05:21] The server is fired up and ready to roll!\n")
    with unwritable(folder):
        listed = run_cli("runs", "--json", "--ledger", str(path))
        assert listed.returncode == 0 and [r["name"] for r in json.loads(listed.stdout)] == ["b", "a"], listed.stderr
        for args in (["show", "1"], ["diff", "1", "2"]):
            proc = run_cli(*args, "--ledger", str(path))
            assert proc.returncode == 0 and proc.stderr == b"", (args, proc.stderr)
        compared = run_cli("compare", "1", "2", "--ledger", str(path))  # read: refused for what the runs are
        assert compared.stderr.decode() == "firedup: run 1 is not a benchmark run (see firedup runs)\n"
        proc = run_cli("diagnose", "--record", str(log), "--ledger", str(path))
        err = proc.stderr.decode()
        assert proc.returncode == 2 and err.count("\n") == 1 and "usable" not in err, err
        assert err.startswith(f"firedup: cannot write to the ledger {path}: unable to open database file "
                              f"(its folder {folder} is read-only"), err
    assert sorted(p.name for p in folder.iterdir()) == ["l.db"]


def test_a_read_only_ledger_whose_wal_file_holds_runs_is_read_with_them_or_refused(tmp_path):
    """A writer left runs in the -wal file, not yet in the main file: read with them (the -shm file is
    there too), or, without the -shm file, refused in one line; never read as if they were not there."""
    source, folder = tmp_path / "source.db", tmp_path / "ledgers"
    folder.mkdir()
    with Ledger(source) as ledger:
        ledger.db.execute("PRAGMA wal_autocheckpoint = 0")
        ledger.record(kind="launch", name="in-wal", outcome="ready", phases={})
        for suffix in ("", "-wal", "-shm"):
            shutil.copy(f"{source}{suffix}", f"{folder / 'l.db'}{suffix}")
    path = folder / "l.db"
    with unwritable(folder):
        listed = run_cli("runs", "--json", "--ledger", str(path))
        assert [r["name"] for r in json.loads(listed.stdout)] == ["in-wal"], listed.stderr
    (folder / "l.db-shm").unlink()
    with unwritable(folder):
        proc = run_cli("runs", "--ledger", str(path))
    assert proc.returncode == 2 and proc.stderr.decode() == (
        f"firedup: cannot open the ledger {path}: its folder {folder} is read-only, and its runs in l.db-wal "
        "cannot be read without the l.db-shm file SQLite would make there: copy the ledger with its -wal file "
        "to a writable folder\n")


@pytest.mark.parametrize("command", [["runs"], ["show", "1"], ["diff", "1", "2"], ["compare", "1", "2"]])
def test_a_read_of_a_ledger_that_does_not_exist_says_so_and_makes_none(tmp_path, command):
    path = tmp_path / "nowhere" / "l.db"
    proc = run_cli(*command, "--ledger", str(path))
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.decode() == f"firedup: there is no ledger at {path}: nothing was recorded there\n"
    assert not path.parent.exists()


def disk_full(monkeypatch):
    """Every run written from now on refused, as a disk that filled after the ledger opened refuses it."""
    def record(self, **run):
        raise LedgerError(f"cannot write to the ledger {self.path}: database or disk is full")

    monkeypatch.setattr(Ledger, "record", record)


def test_a_diagnosis_the_ledger_refuses_is_still_shown_with_its_exit_code(tmp_path, monkeypatch, capsys):
    from firedup import cli

    log = tmp_path / "x.log"
    log.write_text("launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2\n")
    path = tmp_path / "l.db"
    one_run(path)
    disk_full(monkeypatch)
    assert cli.main(["diagnose", "--record", "--ledger", str(path), str(log)]) == 1
    out, err = capsys.readouterr()
    assert "failed" in out and "bad_argument" in out
    assert err == f"firedup: cannot write to the ledger {path}: database or disk is full\n"


@pytest.mark.parametrize("ready", [True, False])
def test_a_launch_the_ledger_refuses_still_shows_its_verdict_and_stops_a_failed_server(tmp_path, monkeypatch,
                                                                                        capsys, ready):
    from firedup import cli
    from firedup.sources.pgroup import group_alive

    pid_file = tmp_path / "pid"
    last = ("[2025-04-09 05:05:21] The server is fired up and ready to roll!" if ready
            else "OSError: [Errno 98] Address already in use")
    server = tmp_path / "server.py"
    server.write_text(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                      "print(\"[2025-04-09 05:05:03] server_args=ServerArgs(model_path='m')\")\n"
                      f"print({last!r}, flush=True)\ntime.sleep(60)\n")
    path = tmp_path / "l.db"
    one_run(path)
    disk_full(monkeypatch)
    try:
        code = cli.main(["launch", "--name", "full", "--stall", "30", "--ledger", str(path), "--",
                         sys.executable, "-u", str(server)])
        out, err = capsys.readouterr()
        assert code == (0 if ready else 1), (out, err)
        assert ("✓ ready" if ready else "✗ failed") in out
        assert err == f"firedup: cannot write to the ledger {path}: database or disk is full\n"
        assert group_alive(int(pid_file.read_text())) is ready  # a failed start stopped as usual
    finally:
        if pid_file.exists() and group_alive(int(pid_file.read_text())):
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)


@pytest.mark.parametrize("command", ["bench", "run", "run --vs"])
def test_a_benchmark_the_ledger_refuses_still_shows_its_numbers_and_says_they_were_not_recorded(
        tmp_path, monkeypatch, capsys, command):
    from firedup import cli

    path = tmp_path / "l.db"
    one_run(path)
    disk_full(monkeypatch)
    url, serve = zero_server()
    args = {"bench": ["bench", "--calibrate"], "run": ["run", "--url", url, "--", *serve],
            "run --vs": ["run", "--url", url, "--repeat", "2", "--", *serve, "--vs", *serve]}[command]
    code = cli.main([args[0], "--num-prompts", "4", "--input-len", "4", "--output-len", "4", "--warmup", "0",
                     "--json", "--ledger", str(path), *args[1:]])
    out, err = capsys.readouterr()
    assert code in (0, 1), err  # 1: the zero-work server can make the client the bottleneck
    shown = json.loads(out)
    if command == "run --vs":
        assert shown["runs"] == {"A": None, "B": None} and shown["compare"]["rows"]
    else:
        assert shown["completed"] == 4 and shown["run_id"] is None
    full = f"firedup: cannot write to the ledger {path}: database or disk is full"
    lost = [f"{full}: the benchmark's numbers were not recorded"]
    assert err.splitlines() == (lost if command == "bench" else [full, *lost]), err
    assert [r["name"] for r in json.loads(run_cli("runs", "--json", "--ledger", str(path)).stdout)] == ["kept"]


def test_one_damaged_row_is_named_in_one_line_and_the_other_runs_read_as_before(tmp_path):
    """A JSON column that is not JSON (or not the shape it holds) spoils only its own run: runs lists every
    run and names the damaged one on stderr; show, diff and compare of it say so in one line, exit 2; the
    others show, diff and compare as before; a start's history passes over it; the file is left as it was."""
    from firedup.bench.compare import aggregate
    from firedup.bench.workload import Workload
    from firedup.ledger.memory import Memory

    path = tmp_path / "l.db"
    argv = ["vllm", "serve", "m"]
    with Ledger(path) as ledger:
        for throughput in (90.0, 80.0, 85.0):
            ledger.record(kind="bench", name="b", outcome="ready", workload=Workload().describe(), phases={},
                          metrics=aggregate([{"output_throughput": throughput, "client": "firedup", "model": "m"}]))
        ledger.record(kind="launch", name="l", outcome="ready", command=argv, phases={"weights": 3.0},
                      fingerprint=history.fingerprint("vllm", argv, None))
    db = sqlite3.connect(path)
    db.execute("UPDATE runs SET metrics = '{not json' WHERE id = 2")
    db.execute("UPDATE runs SET phases = '[1, 2]', config = '[]' WHERE id = 4")
    db.commit()
    db.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()

    def cli(*args):
        proc = run_cli(*args, "--ledger", str(path))
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()

    code, out, err = cli("runs")
    assert code == 0 and [line.split()[0] for line in out.splitlines()[1:]] == ["4", "3", "2", "1"], out
    assert ["damaged" in line for line in out.splitlines()[1:]] == [True, False, True, False], out
    assert err.splitlines() == [
        "firedup: run 4 is damaged in the ledger: its config, phases are a list, not an object; left as it is",
        "firedup: run 2 is damaged in the ledger: its metrics is not JSON (Expecting property name enclosed "
        "in double quotes: line 1 column 2 (char 1)); left as it is"], err
    code, out, err = cli("runs", "--json")
    listed = {r["id"]: r for r in json.loads(out)}
    assert code == 0 and listed[2]["metrics"] is None and list(listed[2]["damaged"]) == ["metrics"]
    assert listed[4]["phases"] == {} and "damaged" not in listed[3]
    for args in (["show", "2"], ["show", "--json", "2"], ["diff", "1", "2"], ["compare", "2", "3"],
                 ["compare", "--force", "3", "2"], ["bench", "2"]):
        code, out, err = cli(*args)
        assert code == 2 and out == "" and err.count("\n") == 1, (args, code, err)
        assert err.startswith(f"firedup: run 2 is damaged in the ledger {path}: its metrics is not JSON ("), err
    assert cli("show", "3")[0] == 0 and cli("diff", "1", "3")[0] == 0 and cli("compare", "1", "3")[0] == 0
    with Ledger(path) as ledger:  # the launch's history passes over its damaged run
        assert Memory(ledger, "vllm", argv).last_good is None
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_diff_shortens_a_long_value_and_json_keeps_it_whole():
    """vLLM prints a compilation_config of 1,500 characters: the table is not padded to its width; a
    value is folded in its column (a command line whole, the difference at its end seen), a long one cut."""
    long_a, long_b = "{'level': 3, " + "a" * 1500 + "}", "{'level': 0, " + "b" * 1500 + "}"
    with Ledger() as ledger:
        for value, dtype in ((long_a, "float16"), (long_b, "bfloat16")):
            ledger.record(kind="launch", outcome="ready", phases={},
                          config={"compilation_config": value, "dtype": dtype})
    command = ["python", "-m", "llama_cpp.server", "--model", "/models/" + "m" * 60 + ".gguf", "--n_threads"]
    with Ledger() as ledger:
        for threads in ("1", "2"):
            ledger.record(kind="launch", outcome="ready", phases={}, command=[*command, threads])
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # piped: no width to fold to
    out = subprocess.run([sys.executable, "-m", "firedup", "diff", "1", "2"], capture_output=True, env=env).stdout
    lines = out.decode().splitlines()
    assert max(len(line) for line in lines) < 200, [len(line) for line in lines]
    assert 300 < out.count(b"a") < 500 and out.count(b"b") < 500 and f"({len(long_a)} characters)".encode() in out
    assert any(line.split()[1:] == ["dtype", "float16", "bfloat16"] for line in lines), lines
    args = run_cli("diff", "3", "4").stdout.decode()
    tail = ["mmmmmmmm.gguf", "--n_threads"]
    assert args.splitlines()[-1].split() == [*tail, "1", *tail, "2"], args
    changes = json.loads(run_cli("diff", "--json", "1", "2").stdout)["changes"]
    assert {"section": "config", "key": "compilation_config", "a": long_a, "b": long_b} in changes


def test_watched_standard_input_is_one_configuration_only_with_the_same_settings(tmp_path):
    """`server | firedup watch -` names no log: two pipes are one configuration only when their servers
    printed the same settings (else a history learnt from another server's start would judge this one)."""
    path = tmp_path / "l.db"
    args = "[2025-04-09 05:05:03] server_args=ServerArgs(model_path='{model}', tp_size=1, port=30000)\n"
    ready = "[2025-04-09 05:05:21] The server is fired up and ready to roll!\n"
    for model in ("a/one", "a/one", "b/two"):
        proc = run_cli("watch", "--ledger", str(path), "-", stdin=(args.format(model=model) + ready).encode())
        assert proc.returncode == 0, proc.stderr
    proc = run_cli("watch", "--ledger", str(path), "-", stdin=b"not a server's log, no settings in it\n")
    with Ledger(path) as ledger:
        prints = [r["fingerprint"] for r in sorted(ledger.find(kind="watch"), key=lambda r: r["id"])]
    assert len(prints) == 4 and prints[0] == prints[1] and len(set(prints)) == 3
