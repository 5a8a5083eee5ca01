"""Real inference servers on 127.0.0.1 under `launch`, with a tiny random-weight
model: transformers serve and vLLM's CPU build, each brought to ready and made
to fail for real (scripts/setup-servers.sh installs them; CI runs all of this).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from firedup._launch import start_and_watch
from firedup.sources.pgroup import group_alive, stop_group

from .conftest import ROOT

SERVERS = Path(os.environ.get("FIREDUP_SERVERS", ROOT / ".servers"))
TF = SERVERS / "venv-tf" / "bin" / "transformers"
VLLM = SERVERS / "venv-vllm" / "bin" / "python"
MODEL = SERVERS / "models" / "tiny-llama"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"}


def cli_env() -> dict[str, str]:
    """ENV with this test's own ledger and state (set after ENV was built)."""
    return {**ENV, **{k: os.environ[k] for k in ("FIREDUP_LEDGER", "XDG_STATE_HOME")}}


def need(path: Path):
    """Mark a test `servers` (make test-fast leaves it out) and skip it where `path` is missing."""
    missing = not path.exists()
    if missing and os.environ.get("CI"):
        raise RuntimeError(f"CI must run the real-server tests, but {path} is missing (scripts/setup-servers.sh all)")
    skip = pytest.mark.skipif(missing, reason=f"{path} is missing: run scripts/setup-servers.sh all")
    return lambda test: pytest.mark.servers(skip(test))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Recorder:
    """A sink that keeps the events with their times."""

    def __init__(self):
        self.events = []

    def event(self, t, name, **fields):
        self.events.append((t, name, fields))

    def update(self, view):
        pass


def launch(argv, tmp_path, env=ENV, **options):
    recorder = Recorder()
    options.setdefault("stall", 120)
    launched = start_and_watch([str(a) for a in argv], log=tmp_path / "server.log", env=env, sinks=[recorder],
                               stop_grace=5, **options)
    exits = [t for t, name, _ in recorder.events if name == "exit"]
    if exits:  # a failure is known at the latest 2 s after the process exits
        assert launched.verdict.elapsed - exits[0] <= 2.0
    if launched.verdict.outcome != "ready":
        assert not group_alive(launched.pgid) or launched.verdict.outcome == "stalled"
    return launched


def tf(model, port, *extra):
    return [TF, "serve", model, "--host", "127.0.0.1", "--port", port, "--device", "cpu", "--log-level", "info", *extra]


def vllm(model, port, *extra, eager=True):
    return [VLLM, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", "127.0.0.1",
            "--port", port, "--max-model-len", "512", *(["--enforce-eager"] if eager else []), *extra]


def broken_copy(tmp_path, how: str) -> Path:
    model = tmp_path / "model"
    shutil.copytree(MODEL, model)
    shard = model / "model-00003-of-00012.safetensors"
    if how == "truncate":
        os.truncate(shard, 100)
    else:  # a named pipe nobody writes: loading blocks at this shard for ever
        shard.unlink()
        os.mkfifo(shard)
    return model


def huge_model(tmp_path) -> Path:
    """The tiny model's files with the config of a 20B-parameter model and no weights."""
    model = tmp_path / "huge"
    shutil.copytree(MODEL, model, ignore=shutil.ignore_patterns("model*"))
    config = json.loads((model / "config.json").read_text())
    config.update(hidden_size=8192, intermediate_size=28672, num_hidden_layers=40, num_attention_heads=64,
                  num_key_value_heads=8)
    (model / "config.json").write_text(json.dumps(config))
    shutil.copy(MODEL / "model-00001-of-00012.safetensors", model / "model.safetensors")
    return model


def assert_stopped(launched):
    try:
        assert launched.verdict.outcome == "ready", launched.verdict
    finally:
        stop_group(launched.pgid, 15, launched.popen.poll)
    assert not group_alive(launched.pgid)


# -- the situations users are in: a port still held, a log watched alone -----------

@need(TF)
def test_relaunch_onto_a_port_a_real_server_still_holds_is_port_in_use_at_once(tmp_path):
    port = free_port()
    old = start_and_watch([str(a) for a in tf(MODEL, port)], name="old-tf", log=tmp_path / "old.log", env=ENV,
                          stall=120, stop_grace=5)
    try:
        assert old.verdict.outcome == "ready", old.verdict
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "firedup", "launch", "--json", "--name", "new-tf", "--",
                               *map(str, tf(MODEL, port))], capture_output=True, env=cli_env(), timeout=60)
        took = time.monotonic() - started
    finally:
        old.stop(5)
    verdict = json.loads(proc.stdout.splitlines()[-1])
    assert proc.returncode == 1 and (verdict["outcome"], verdict["cause"]) == ("failed", "port_in_use")
    assert f"pid {old.record.pid}" in verdict["evidence"]["line"] and "old-tf" in verdict["evidence"]["line"]
    assert took <= 2.0


@need(TF)
def test_with_the_check_off_a_health_200_from_the_old_server_is_not_ready(tmp_path):
    port = free_port()
    old = start_and_watch([str(a) for a in tf(MODEL, port)], log=tmp_path / "old.log", env=ENV, stall=120,
                          stop_grace=5)
    try:
        assert old.verdict.outcome == "ready", old.verdict
        new = launch(tf(MODEL, port), tmp_path, port_check=False)
    finally:
        old.stop(5)
    assert (new.verdict.outcome, new.verdict.cause) == ("failed", "port_in_use")


@need(TF)
@pytest.mark.parametrize("how,cause", [("missing-model", "model_not_found"), ("bad-flag", "bad_argument")])
def test_watch_without_pid_finds_the_writer_of_a_real_server_that_dies(tmp_path, how, cause):
    log = tmp_path / "server.log"
    argv = tf(tmp_path / "no-such-model", free_port()) if how == "missing-model" else tf(MODEL, free_port(), "--nope")
    with open(log, "ab") as out:
        server = subprocess.Popen([str(a) for a in argv], stdout=out, stderr=subprocess.STDOUT, env=ENV)
    watch = subprocess.Popen([sys.executable, "-m", "firedup", "watch", "--json", str(log)],
                             stdout=subprocess.PIPE, env=cli_env())
    exited = []
    waiter = threading.Thread(target=lambda: exited.append((server.wait(), time.monotonic())))
    waiter.start()
    events = [json.loads(line) for line in watch.stdout]
    decided = time.monotonic()
    waiter.join()
    verdict = events[-1]
    assert [e["pid"] for e in events if e["event"] == "writer"] == [server.pid]
    assert (verdict["outcome"], verdict["cause"]) == ("failed", cause)
    assert decided - exited[0][1] <= 3.0


# -- transformers serve ---------------------------------------------------------

@need(TF)
def test_tf_ready(tmp_path):
    launched = launch(tf(MODEL, free_port()), tmp_path)
    assert launched.verdict.server == "transformers"
    assert launched.verdict.evidence["line"].startswith("INFO:     Uvicorn running on http://127.0.0.1:")
    assert_stopped(launched)


@need(TF)
def test_tf_missing_model(tmp_path):
    v = launch(tf(tmp_path / "no-such-model", free_port()), tmp_path).verdict
    assert (v.outcome, v.cause) == ("failed", "model_not_found")


@need(TF)
def test_tf_port_in_use(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        # the server's own bind error, read from its log (the port check would refuse first)
        v = launch(tf(MODEL, holder.getsockname()[1]), tmp_path, port_check=False).verdict
    assert (v.outcome, v.cause) == ("failed", "port_in_use")


@need(TF)
def test_tf_invalid_flag(tmp_path):
    v = launch(tf(MODEL, free_port(), "--no-such-flag"), tmp_path).verdict
    assert (v.outcome, v.cause) == ("failed", "bad_argument")


@need(TF)
def test_tf_truncated_shard(tmp_path):
    v = launch(tf(broken_copy(tmp_path, "truncate"), free_port()), tmp_path).verdict
    assert (v.outcome, v.cause) == ("failed", "corrupt_checkpoint")


@need(TF)
def test_tf_model_too_large_for_the_memory_limit(tmp_path):
    command = " ".join(map(str, tf(huge_model(tmp_path), free_port())))
    v = launch(["bash", "-c", f"ulimit -v 6000000; exec {command}"], tmp_path).verdict
    assert (v.outcome, v.cause) == ("failed", "host_oom")


@need(TF)
def test_tf_blocked_on_a_fifo_is_stalled(tmp_path):
    launched = launch(tf(broken_copy(tmp_path, "fifo"), free_port()), tmp_path, stall=10, kill_on_stall=True)
    v = launched.verdict
    assert v.outcome == "stalled" and v.phase in ("init", "weights")
    assert not group_alive(launched.pgid)


# -- vLLM (CPU build) -----------------------------------------------------------

@need(VLLM)
def test_vllm_ready(tmp_path):
    launched = launch(vllm(MODEL, free_port()), tmp_path)
    v = launched.verdict
    assert v.server == "vllm" and v.version == "0.32.0" and v.config["max_model_len"] == 512
    assert v.evidence["line"] == "INFO:     Application startup complete."
    assert_stopped(launched)


@need(VLLM)
def test_vllm_missing_model(tmp_path):
    v = launch(vllm(tmp_path / "no-such-model", free_port()), tmp_path).verdict
    assert (v.outcome, v.cause) == ("failed", "model_not_found")


@need(VLLM)
def test_vllm_port_in_use(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        # the server's own bind error, read from its log (the port check would refuse first)
        v = launch(vllm(MODEL, holder.getsockname()[1]), tmp_path, port_check=False).verdict
    assert (v.outcome, v.cause) == ("failed", "port_in_use")


@need(VLLM)
def test_vllm_invalid_flag(tmp_path):
    v = launch(vllm(MODEL, free_port(), "--no-such-flag"), tmp_path).verdict
    assert (v.outcome, v.cause) == ("failed", "bad_argument")


@need(VLLM)
def test_vllm_truncated_shard(tmp_path):
    v = launch(vllm(broken_copy(tmp_path, "truncate"), free_port()), tmp_path).verdict
    assert (v.outcome, v.cause, v.phase) == ("failed", "corrupt_checkpoint", "weights")
    assert "SafetensorError" in v.evidence["line"]


@need(VLLM)
def test_vllm_kv_cache_larger_than_memory(tmp_path):
    v = launch(vllm(MODEL, free_port()), tmp_path, env={**ENV, "VLLM_CPU_KVCACHE_SPACE": "100"}).verdict
    assert (v.outcome, v.cause) == ("failed", "host_oom")


@need(VLLM)
def test_vllm_blocked_on_a_fifo_is_stalled_and_killed(tmp_path):
    """vLLM ignores SIGTERM here for more than 10 s: the stop must end in SIGKILL."""
    started = time.monotonic()
    launched = launch(vllm(broken_copy(tmp_path, "fifo"), free_port()), tmp_path, stall=20, kill_on_stall=True)
    assert launched.verdict.outcome == "stalled" and launched.verdict.phase == "weights"
    assert not group_alive(launched.pgid)
    assert time.monotonic() - started < 120


@need(VLLM)
def test_vllm_compiling_silently_is_not_a_stall(tmp_path):
    """Without --enforce-eager vLLM compiles for tens of seconds without a line."""
    launched = launch(vllm(MODEL, free_port(), eager=False), tmp_path, stall=20)
    assert_stopped(launched)


@need(TF)
def test_tf_ready_with_a_one_token_probe(tmp_path):
    launched = launch(tf(MODEL, free_port()), tmp_path, probe_generate=True)
    assert launched.verdict.outcome == "ready"
    assert_stopped(launched)


# -- llama.cpp (llama-cpp-python's server) -------------------------------------

LLAMA = SERVERS / "venv-llama" / "bin" / "python"
GGUF = SERVERS / "models" / "tiny-llama.gguf"


def llama(model, port, *extra):
    return [LLAMA, "-m", "llama_cpp.server", "--model", model, "--host", "127.0.0.1", "--port", port,
            "--n_ctx", "512", *extra]


@need(GGUF)
def test_llama_ready(tmp_path):
    launched = launch(llama(GGUF, free_port()), tmp_path)
    assert launched.verdict.server == "llamacpp"
    assert launched.verdict.evidence["line"].startswith("INFO:     Uvicorn running on http://127.0.0.1:")
    assert_stopped(launched)


@need(GGUF)
def test_llama_missing_model(tmp_path):
    v = launch(llama(tmp_path / "no-such.gguf", free_port()), tmp_path).verdict
    assert (v.outcome, v.cause) == ("failed", "model_not_found")


@need(GGUF)
def test_llama_port_in_use(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        # the server's own bind error, read from its log (the port check would refuse first)
        v = launch(llama(GGUF, holder.getsockname()[1]), tmp_path, port_check=False).verdict
    assert (v.outcome, v.cause) == ("failed", "port_in_use")


@need(GGUF)
def test_llama_invalid_flag(tmp_path):
    v = launch(llama(GGUF, free_port(), "--no-such-flag"), tmp_path).verdict
    assert (v.outcome, v.cause) == ("failed", "bad_argument")


@need(GGUF)
def test_llama_truncated_gguf(tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(GGUF.read_bytes()[: GGUF.stat().st_size // 2])
    v = launch(llama(broken, free_port()), tmp_path).verdict
    assert (v.outcome, v.cause) == ("failed", "corrupt_checkpoint")


@need(GGUF)
def test_llama_blocked_on_a_fifo_is_stalled(tmp_path):
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    launched = launch(llama(fifo, free_port()), tmp_path, stall=10, kill_on_stall=True)
    assert launched.verdict.outcome == "stalled" and not group_alive(launched.pgid)
