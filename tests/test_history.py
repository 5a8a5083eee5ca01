"""History at work on real launches of the tiny-model server (transformers
serve): a run whose model read is delayed on purpose is called out as slow,
with what changed; a phase history knows to be slow gets a longer stall window."""

import shutil

import pytest

from firedup._launch import start_and_watch
from firedup.ledger.history import change_lines, diff, notable
from firedup.ledger.store import Ledger
from firedup.sources.pgroup import group_alive, stop_group

from .test_servers import ENV, MODEL, TF, free_port, need, tf

# Delays the first safetensors read of the server by FIREDUP_TEST_READ_DELAY
# seconds: the server sits silent in its weights phase, as on a slow disk.
SLOW_READ = '''
import importlib.abc, importlib.util, os, sys, time
delay = float(os.environ.get("FIREDUP_TEST_READ_DELAY", "0"))

class SlowSafetensors(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "safetensors" or not delay:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            real, slept = module.safe_open, []

            def safe_open(*args, **kwargs):
                if not slept:
                    slept.append(time.sleep(delay))
                return real(*args, **kwargs)

            module.safe_open = safe_open

        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, SlowSafetensors())
'''


@pytest.fixture
def server(tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SLOW_READ)
    model = tmp_path / "model"
    shutil.copytree(MODEL, model)
    port = free_port()

    def launch(ledger, delay=0, stall=60, extra_env=None):
        env = {**ENV, "PYTHONPATH": str(hook), "FIREDUP_TEST_READ_DELAY": str(delay), **(extra_env or {})}
        launched = start_and_watch([str(a) for a in tf(model, port)], env=env, ledger=ledger, stall=stall,
                                   kill_on_stall=True, log=tmp_path / "server.log", stop_grace=5)
        if group_alive(launched.pgid):
            stop_group(launched.pgid, 10, launched.popen.poll)
        return launched.verdict

    return launch


@need(TF)
def test_a_slow_model_read_is_called_out_with_what_changed(server, tmp_path):
    ledger = Ledger(tmp_path / "history.db")
    usual = [server(ledger) for _ in range(2)]
    assert [v.outcome for v in usual] == ["ready", "ready"]
    assert usual[1].phases["weights"] < 5

    slow = server(ledger, delay=8, extra_env={"OMP_NUM_THREADS": "1"})
    assert slow.outcome == "ready"
    assert any(a.startswith("weights ") and "usual" in a for a in slow.anomalies), slow.anomalies
    assert {"section": "env", "key": "OMP_NUM_THREADS", "a": None, "b": "1"} in slow.changes
    assert not [c for c in slow.changes if c["section"] == "phases" or "port" in str(c["key"])]

    # Now weights usually takes up to ~8 s here: a 6 s silent read with a 4 s
    # stall window is a slow phase, not a stall...
    assert server(ledger, delay=6, stall=4).outcome == "ready"
    # ...while without that history the same run is stalled.
    assert server(Ledger(tmp_path / "empty.db"), delay=6, stall=4).outcome == "stalled"


def test_changes_compare_like_with_like_and_fit_in_ten_lines():
    full = {f"setting_{i}": i for i in range(200)}
    full.update(attention_backend="fa3", port=30000, random_seed=1, download_dir="/tmp/x/models", tp_size=8)
    a = {"command": ["python", "-m", "sglang.launch_server"], "server": "sglang", "version": "0.5.2",
         "config": full, "environment": {"packages": {"torch": "2.8.0"}}, "phases": {"init": 5.0}}
    b = {**a, "config": {"attention_backend": "triton", "port": 30001, "tp_size": 8},
         "environment": {"packages": {"torch": "2.9.1"}}, "phases": {"init": 50.0}}
    changes = notable(diff(a, b))
    assert [c["key"] for c in changes[:2]] == ["torch", "attention_backend"]  # packages, then what matters
    summary = changes[-1]
    assert summary["key"] is None and len(summary["only_a"]) == 200 and summary["only_b"] == []
    assert not any(c["key"] in ("port", "random_seed", "download_dir") for c in changes)
    lines = change_lines(changes)
    assert len(lines) <= 10
    assert lines[0] == "torch 2.8.0 → 2.9.1" and lines[1] == "attention_backend fa3 → triton"
    assert lines[2].startswith("config: 200 key(s) only the last good run printed (setting_0, setting_1,")


def test_a_run_without_an_environment_snapshot_is_not_a_list_of_unset_packages():
    a = {"command": ["transformers", "serve", "m"], "server": "transformers", "version": None, "config": {},
         "environment": {"packages": {"torch": "2.13.0"}, "env": {"HF_HUB_OFFLINE": "1"}}, "phases": {}}
    b = {**a, "environment": {}}
    assert change_lines(notable(diff(a, b))) == ["snapshot taken → missing"]


def test_a_version_the_server_had_not_printed_yet_is_no_change():
    # a start that timed out before its banner: its version is unknown, not changed
    a = {"command": ["vllm", "serve", "m"], "server": "vllm", "version": "0.11.0", "config": {"dtype": "bfloat16"},
         "environment": {}, "phases": {}}
    b = {**a, "version": None, "config": {}}
    assert not any(c["section"] == "server" for c in notable(diff(a, b)))
    assert [c["b"] for c in notable(diff(a, {**a, "version": "0.11.1"}))] == ["0.11.1"]
