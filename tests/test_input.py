"""Awkward input: colour codes, bad bytes, CRLF, redraws, huge lines, prefixes,
stdin, files still being written, unreadable paths; and the CLI's contract."""

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from firedup import Ledger, diagnose, scanner
from firedup.engine import Engine

from .conftest import FIXTURES, corpus_logs, run_cli

READY = b"[2025-04-09 05:05:21] The server is fired up and ready to roll!\n"
ARGS = b"[2025-04-09 05:05:03] server_args=ServerArgs(model_path='m', attention_backend='triton')\n"


def verdict_of(data: bytes, **kw):
    return diagnose(io.BytesIO(data), **kw)


def test_ansi_codes_are_removed_from_evidence():
    v = verdict_of(ARGS + b"\x1b[1;36m[2025-04-09 05:05:21]\x1b[0;0m The server is \x1b[32mfired up\x1b[0m "
                          b"and ready to roll!\n")
    assert v.outcome == "ready"
    assert v.evidence["line"] == "[2025-04-09 05:05:21] The server is fired up and ready to roll!"


def test_invalid_utf8_and_crlf():
    v = verdict_of(ARGS.replace(b"\n", b"\r\n") + b"\xff\xfe garbage \xc3\x28\r\n" + READY.replace(b"\n", b"\r\n"))
    assert v.outcome == "ready"
    assert v.evidence == {"line": "[2025-04-09 05:05:21] The server is fired up and ready to roll!", "lineno": 3}


def test_tqdm_redraws_glued_on_one_line():
    bar = "".join(f"\rLoading safetensors checkpoint shards: {p:3d}% Completed | {n}/4 [00:01<00:01, 1.4s/it]"
                  for n, p in ((0, 0), (1, 25), (2, 50), (3, 75)))
    v = verdict_of(ARGS + b"[2025-04-09 05:05:13 TP0] Load weight begin. avail mem=59.60 GB\n" + bar.encode())
    assert v.outcome == "incomplete" and v.phase == "weights"
    assert v.progress == {"desc": "Loading safetensors checkpoint shards", "n": 3, "total": 4}


def test_a_bars_last_redraw_with_a_warning_glued_after_it_is_where_the_start_got():
    """The bar printed no newline, so the interpreter's exit warning follows it on its line:
    the bar came first, and the start had got there before it went down."""
    bar = "".join(f"\rLoading safetensors checkpoint shards: {p:3d}% Completed | {n}/4 [00:01<00:01, 1.4s/it]"
                  for n, p in ((0, 0), (1, 25), (2, 50), (3, 75)))
    warning = ("/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: resource_tracker: There "
               "appear to be 1 leaked semaphore objects to clean up at shutdown\n")
    v = verdict_of(ARGS + b"[2025-04-09 05:05:13 TP0] Load weight begin.\n" + (bar + warning).encode())
    assert v.outcome == "incomplete" and v.phase == "weights"
    assert v.evidence["line"].startswith("Loading safetensors checkpoint shards:  75% Completed | 3/4")


def test_a_redraw_still_being_drawn_is_read_when_asked_for():
    def bar(n):
        return f"\rLoading safetensors checkpoint shards: {25 * n:3d}% Completed | {n}/4 [00:01<00:01, 1.4s/it]"

    def progress(signals):
        return [s.data["n"] for s in signals if s.kind == "progress"]

    engine = Engine()
    assert progress(engine.feed(ARGS + b"[2025-04-09 05:05:13 TP0] Load weight begin.\n" + bar(1).encode())) == []
    assert progress(engine.peek()) == [1] and engine.peek() == []  # once per redraw
    assert progress(engine.feed(bar(2).encode())) == [1]  # ended by the next redraw: read as usual
    assert progress(engine.peek()) == [2]
    assert progress(engine.feed(b"\n[2025-04-09 05:05:20] Load weight end. type=LlamaForCausalLM")) == [2]
    assert engine.peek() == []  # a line still being written is not a redraw
    assert Engine().peek() == []


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_the_line_before_a_stop_is_found_however_the_input_was_cut(chunk):
    """Where a start stopped with Ctrl-C had got: the line before the stop,
    blank lines skipped, whether it came in the same read or an earlier one."""
    data = (ARGS + b"[2025-04-09 05:05:13 TP0] Load weight begin. avail mem=59.60 GB\n"
            b"[2025-04-09 05:05:14 TP0] Using model weights format ['*.safetensors']\n\n\n^C\n")
    engine = Engine()
    stops = []
    for i in range(0, len(data), chunk):
        stops += [s for s in engine.feed(data[i:i + chunk]) if s.kind == "stopped"]
    stops += [s for s in engine.close() if s.kind == "stopped"]
    assert [s.data["before"] for s in stops] == \
        [(3, "[2025-04-09 05:05:14 TP0] Using model weights format ['*.safetensors']")]


def test_line_of_many_megabytes():
    huge = b"x" * (5 << 20) + b" error in the middle " + b"y" * (3 << 20) + b"\n"
    v = verdict_of(ARGS + huge + READY)
    assert v.outcome == "ready" and v.evidence["lineno"] == 3


def test_prefixes_docker_compose_and_timestamps():
    v = verdict_of(b"sglang-1  | 2025-02-04 21:29:23 [2025-02-04 05:29:23] server_args=ServerArgs(model_path='m')\n"
                   b"sglang-1  | 2025-02-04T21:29:23.123Z [2025-02-04 05:29:23] "
                   b"The server is fired up and ready to roll!\n")
    assert v.outcome == "ready" and v.server == "sglang"


def test_empty_input_is_incomplete_and_says_it_is_empty():
    v = verdict_of(b"")
    assert v.outcome == "incomplete" and v.evidence is None and v.code == 5
    assert v.explanation == "The log is empty: there is nothing in it to read."
    assert verdict_of(ARGS).explanation.startswith("The log ends before the server said it was ready")


def test_docker_json_file_records_read_as_the_lines_they_hold():
    """Docker's json-file driver keeps each line as {"log": ..., "stream": ..., "time": ...}."""
    plain = ARGS + b"[2025-04-09 05:05:13 TP0] Load weight begin. avail mem=59.60 GB\n" + READY
    wrapped = b"".join(json.dumps({"log": line + "\n", "stream": "stderr", "time": "2025-04-09T05:05:21.1Z"}).encode()
                       + b"\n" for line in plain.decode().splitlines())
    v, w = verdict_of(plain), verdict_of(wrapped)
    assert (w.outcome, w.server, w.phase) == (v.outcome, v.server, v.phase) == ("ready", "sglang", "serving")
    assert "The server is fired up and ready to roll!" in w.evidence["line"]


def test_no_break_spaces_of_a_copied_page_read_as_spaces():
    plain = b"INFO:     Started server process [7]\n" + ARGS + READY
    nbsp = b"".join(b"\xc2\xa0\xc2\xa0" + line.replace(b"  ", b"\xc2\xa0 ") + b"\n" for line in plain.splitlines())
    assert verdict_of(nbsp).outcome == "ready"
    failed = ARGS + b"[2025-04-09 05:05:13 TP0] Scheduler hit an exception: Traceback (most recent call last):\n" \
        + b'  File "/x/scheduler.py", line 3, in run\n' + b"torch.OutOfMemoryError: CUDA out of memory.\n"
    pasted = b"".join(b"\xc2\xa0\xc2\xa0" + line.replace(b"  ", b"\xc2\xa0 ") + b"\n" for line in failed.splitlines())
    assert verdict_of(failed).cause == verdict_of(pasted).cause == "cuda_oom"


def test_server_override():
    line = b"INFO:     Application startup complete.\n"
    assert verdict_of(line).outcome == "incomplete"
    assert verdict_of(line, server="vllm").outcome == "ready"


def test_file_still_being_written_is_read_as_far_as_it_went(tmp_path):
    path = tmp_path / "growing.log"
    path.write_bytes(ARGS)
    with open(path, "ab") as writer:
        v = diagnose(path)
        writer.write(READY)
    assert v.outcome == "incomplete"
    assert diagnose(path).outcome == "ready"


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_any_chunking_gives_the_same_signals(chunk):
    data = (FIXTURES / "captured" / "vllm-truncated-shard.log").read_bytes()
    whole = Engine()
    expected = [(s.kind, s.lineno, s.line) for s in whole.feed(data) + whole.close() if s.kind != "lines"]
    engine = Engine()
    got = []
    for i in range(0, len(data), chunk):
        got += engine.feed(data[i:i + chunk])
    got += engine.close()
    assert [(s.kind, s.lineno, s.line) for s in got if s.kind != "lines"] == expected


PRETTY_ARGS = FIXTURES / "reported" / "tgi-2.2.0-args-pretty-printed.log"


@pytest.mark.parametrize("chunk", [1, 64, 1 << 20])
def test_a_configuration_printed_over_many_lines_is_read_whole(chunk):
    data = PRETTY_ARGS.read_bytes()
    engine = Engine()
    signals = []
    for i in range(0, len(data), chunk):
        signals += engine.feed(data[i:i + chunk])
    signals += engine.close()
    configs = [s for s in signals if s.kind == "config"]
    assert configs[0].rule.id == "tgi-args" and configs[0].lineno == 2
    args = configs[0].data
    assert len(args) == 49 and args["model_id"] == "meta-llama/Meta-Llama-3.1-8B-Instruct"
    assert args["huggingface_hub_cache"] == "/data"  # Some(\n "/data",\n )
    assert (args["trust_remote_code"], args["num_shard"], args["cors_allow_origin"]) == (False, None, [])
    assert args["disable_crash_reports"] is False
    verdict = diagnose(PRETTY_ARGS)
    assert verdict.config["max_total_tokens"] == 4096  # the default chosen after Args said None
    assert verdict.config["cuda_graphs"] == "[1, 2, 4, 8, 16, 32]" and verdict.phase == "warmup"


def test_a_configuration_block_cut_short_still_counts_and_the_next_record_is_read():
    lines = PRETTY_ARGS.read_text().splitlines()
    cut = "\n".join(lines[:6] + lines[54:]).encode()  # no closing brace: the next record ends it
    verdict = verdict_of(cut)
    assert verdict.config["model_id"] == "meta-llama/Meta-Llama-3.1-8B-Instruct"
    assert verdict.config["max_input_tokens"] == 4095 and "max_client_batch_size" not in verdict.config
    at_end = verdict_of("\n".join(lines[:6]).encode())  # the log stops inside the block
    assert at_end.config["validation_workers"] == 2


@pytest.mark.slow  # every labelled log scanned twice
def test_python_fallback_prefilter_agrees_with_hyperscan(monkeypatch):
    if scanner.hyperscan is None:
        pytest.skip("hyperscan is not installed here: only the fallback runs")
    logs = corpus_logs() + sorted((FIXTURES / "captured").glob("*.log")) + [PRETTY_ARGS]
    fast = [diagnose(p).to_dict() for p in logs]
    monkeypatch.setattr(scanner, "hyperscan", None)
    monkeypatch.setattr("firedup.engine._PREFILTERS", {})
    assert [diagnose(p).to_dict() for p in logs] == fast


# -- the command line --------------------------------------------------------

def test_cli_json_shape(tmp_path):
    log = FIXTURES / "captured" / "vllm-truncated-shard.log"
    proc = run_cli("diagnose", "--json", str(log))
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert {"outcome", "cause", "server", "phase", "evidence", "explanation", "remedy",
            "progress", "config", "benign"} <= set(out)
    assert out["cause"] == "corrupt_checkpoint" and out["server"] == "vllm"
    assert out["progress"] == {"desc": "Loading safetensors checkpoint shards", "n": 2, "total": 12}
    assert out["config"]["enforce_eager"] is True


def test_cli_human_output():
    proc = run_cli("diagnose", str(FIXTURES / "captured" / "tf-port-in-use.log"))
    text = proc.stdout.decode()
    assert proc.returncode == 1
    assert "failed" in text and "port_in_use" in text and "ss -ltnp" in text and "\x1b[" not in text


def test_cli_reads_stdin():
    proc = run_cli("diagnose", "--json", "-", stdin=ARGS + READY)
    assert proc.returncode == 0 and json.loads(proc.stdout)["outcome"] == "ready"


@pytest.mark.parametrize("target", ["/no/such/file.log", "/"])
def test_cli_unreadable_input(target):
    proc = run_cli("diagnose", target)
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert err.startswith("firedup: cannot read") and err.count("\n") == 1 and "Traceback" not in err


def test_cli_usage_errors():
    assert run_cli("diagnose").returncode == 2
    proc = run_cli("diagnose", "--server", "nope", os.devnull)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr.decode()


@pytest.mark.parametrize("json_output", [["--json"], []])
def test_output_closed_by_its_reader_ends_quietly(json_output):
    """`firedup ... | head`: the reader went away; no error line, no traceback, in JSON or for people (rich)."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "firedup", "diagnose", *json_output, "-"], input=b"hello\n",
                              stdout=write, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (141, b"")


def test_a_launch_whose_output_is_closed_stops_its_server_and_says_so(tmp_path):
    read, write = os.pipe()
    os.close(read)
    marker = f"firedup-test-{os.getpid()}"
    try:
        argv = ["bash", "-c", f"exec -a {marker} sleep 300"]
        proc = subprocess.run([sys.executable, "-m", "firedup", "launch", "--", *argv],
                              stdout=write, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(write)
    stderr = proc.stderr.decode()
    assert proc.returncode == 141 and "Traceback" not in stderr, stderr
    assert stderr.startswith("firedup: output closed by its reader; stopped the server's process group"), stderr
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 1  # no server left


@pytest.mark.parametrize("command", ["watch", "launch"])
def test_help_states_the_exit_codes_of_the_contract(command):
    contract = (Path(__file__).parents[1] / "docs" / "contract.md").read_text()
    table = contract.split("## Outcomes and exit codes")[1].split("\n\n")[1]
    codes = {code for row in table.splitlines()[2:] for code in re.findall(r"\b\d+\b", row.split("|")[2])}
    codes -= {"5", "141"}  # incomplete: diagnose only; a closed output: nobody reads help there
    text = " ".join(run_cli(command, "--help").stdout.decode().split())
    stated = set(re.findall(r"\b(\d+) (?:ready|failed|bad input|stalled|timeout|Ctrl-C|SIGTERM)", text))
    assert stated == codes


def test_every_error_is_a_firedup_error_and_a_bug_shows_its_traceback(monkeypatch, capsys):
    """The CLI prints a FiredupError as one line (exit 2); any other exception is
    a bug in firedup and is not caught: its traceback shows."""
    import firedup
    from firedup import cli

    for name in ("InputError", "LedgerError", "RuleError", "SSHError", "SlurmError", "HttpError", "WorkloadError",
                 "PlotError", "ServerError", "ServerFailed", "ServerStalled", "ServerTimeout"):
        assert issubclass(getattr(firedup, name), firedup.FiredupError), name
    monkeypatch.setitem(cli.COMMANDS, "ps", lambda args: (_ for _ in ()).throw(firedup.InputError("no such thing")))
    assert cli.main(["ps"]) == 2
    assert capsys.readouterr().err == "firedup: no such thing\n"
    monkeypatch.setitem(cli.COMMANDS, "ps", lambda args: {}["missing"])
    with pytest.raises(KeyError):
        cli.main(["ps"])


@pytest.mark.parametrize("args, message", [
    (["bench", "--concurrency", "-3"], "argument --concurrency: must be 1 or more, not -3"),
    (["bench", "--num-prompts", "0"], "argument --num-prompts: must be 1 or more, not 0"),
    (["bench", "--repeat", "x"], "argument --repeat: not a whole number: 'x'"),
    (["bench", "--request-rate", "-1"], "argument --request-rate: must be more than 0, not -1"),
    (["runs", "--limit", "0"], "argument --limit: must be 1 or more, not 0"),
    (["launch", "--nodes", "0", "--slurm"], "argument --nodes: must be 1 or more, not 0"),
    (["compare", "--min-effect", "-5"], "argument --min-effect: must be a finite number, 0 or more, not -5"),
    (["run", "--min-effect", "nan"], "argument --min-effect: must be a finite number, 0 or more, not nan"),
    (["bench", "--temperature", "-1"], "argument --temperature: must be a finite number, 0 or more, not -1"),
    (["bench", "--random-range-ratio", "1"], "argument --random-range-ratio: must be in [0, 1), not 1"),
    (["bench", "--duration", "inf"], "argument --duration: must be a finite positive number of seconds, not inf"),
    (["watch", "--stall", "inf"], "argument --stall: must be a finite positive number of seconds, not inf"),
    (["launch", "--timeout", "inf"], "argument --timeout: must be a finite positive number of seconds, not inf"),
    (["stop", "--grace", "inf"], "argument --grace: must be a finite positive number of seconds, not inf"),
])
def test_numbers_out_of_range_are_refused_in_one_line(args, message):
    proc = run_cli(*args, "http://127.0.0.1:1")
    assert proc.returncode == 2
    assert proc.stderr.decode() == f"firedup {args[0]}: error: {message} (see firedup {args[0]} --help)\n"


def test_a_goodput_of_zero_and_a_run_id_past_sqlite_are_refused_in_one_line():
    proc = run_cli("bench", "--calibrate", "--goodput", "ttft:0")
    assert proc.returncode == 2 and proc.stderr.decode() == (
        "firedup: --goodput takes ttft:MS, tpot:MS or e2el:MS (MS more than 0), not 'ttft:0'\n")
    with Ledger():  # one to look in
        pass
    proc = run_cli("show", str(1 << 64))
    assert proc.returncode == 2
    assert proc.stderr.decode() == f"firedup: no run {1 << 64} in the ledger (see firedup runs)\n"


def test_control_bytes_in_a_log_are_shown_escaped(tmp_path):
    log = tmp_path / "core.log"
    log.write_bytes(b"starting the server\n" * 30 + b"\x7fELF\x02\x01\x01\x00\x00\x07 not a log\n")
    proc = run_cli("diagnose", str(log))
    out = proc.stdout.decode()
    assert proc.returncode == 5 and "line 31: \\x7fELF\\x02\\x01\\x01\\x00\\x00\\x07 not a log" in out
    assert not any(c < " " and c not in "\n" for c in out)
    raw = json.loads(run_cli("diagnose", "--json", str(log)).stdout)  # JSON keeps the line as it was
    assert raw["evidence"]["line"].startswith("\x7fELF\x02")


def test_piped_output_keeps_each_line_whole(tmp_path):
    """Piped or redirected (no terminal, no COLUMNS), the evidence line is not
    folded at 80 columns: grep and copy-paste get it whole."""
    import subprocess

    error = "ValueError: " + "the maximum model length is larger than the KV cache can hold " * 3
    log = tmp_path / "long.log"
    log.write_text("INFO 10-01 22:24:54 [api_server.py:1896] vLLM API server version 0.10.2\n" + error + "\n")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run([sys.executable, "-m", "firedup", "diagnose", str(log)], capture_output=True,
                         env={**env, "NO_COLOR": "1"}, timeout=60).stdout.decode()
    assert f"  line 2: {error.strip()}" in out.splitlines()


def test_a_binary_file_is_refused_in_one_line(tmp_path):
    proc = run_cli("diagnose", sys.executable)
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.decode().strip() == (f"firedup: {sys.executable}: this is a binary file, not a log "
                                            "(NUL and control bytes in its first 8 KB)")


@pytest.mark.parametrize("args, said", [
    (["diagnose", "--bogus", "x.log"], "firedup diagnose: error: unrecognized arguments: --bogus "
                                       "(see firedup diagnose --help)"),
    (["watch", "x.log", "--stall", "abc"], "firedup watch: error: argument --stall: not a number of seconds: 'abc' "
                                           "(see firedup watch --help)"),
    (["nosuch"], "firedup: error: argument command: invalid choice: 'nosuch'"),
])
def test_a_usage_error_is_one_line_naming_the_commands_help(args, said):
    proc = run_cli(*args)
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.decode().count("\n") == 1 and proc.stderr.decode().startswith(said)


def test_a_device_is_refused_in_one_line_not_read_for_ever():
    proc = run_cli("diagnose", "/dev/zero", timeout=20)
    assert proc.returncode == 2
    assert proc.stderr.decode() == ("firedup: /dev/zero is a device, not a log "
                                    "(a log on standard input: firedup diagnose -)\n")
    # watch read /dev/zero into memory until the kernel killed it
    proc = run_cli("watch", "/dev/zero", "--stall", "3", timeout=20)
    assert proc.returncode == 2 and proc.stderr.decode() == "firedup: /dev/zero is a device, not a log\n"
    for command in (["diagnose", "-"], ["watch", "-", "--stall", "3"]):
        with open("/dev/zero", "rb") as zeros:
            proc = subprocess.run([sys.executable, "-m", "firedup", *command], stdin=zeros, capture_output=True,
                                  timeout=20)
        assert proc.returncode == 2 and proc.stderr.decode() == "firedup: standard input is a device, not a log\n"
    assert run_cli("diagnose", "/dev/null").returncode == 5  # the null device reads as an empty log


def test_watch_of_an_empty_target_says_so_not_reads_standard_input():
    proc = run_cli("watch", "", "--stall", "3", stdin=b"INFO 10-01 22:24:54 [api_server.py:1] x\n")
    assert proc.returncode == 2 and proc.stderr.decode() == "firedup: no log given: a path, or - for standard input\n"


def test_watch_refuses_binary_or_gzipped_standard_input_in_one_line(tmp_path):
    import gzip

    proc = run_cli("watch", "-", "--stall", "30", stdin=Path(sys.executable).read_bytes()[:100_000])
    assert proc.returncode == 2 and proc.stderr.decode().endswith(
        "firedup: standard input: this is a binary file, not a log (NUL and control bytes in its first 8 KB)\n")
    proc = run_cli("watch", "-", "--stall", "30", stdin=gzip.compress(b"INFO 10-01 22:24:54 [api_server.py:1] x\n"))
    assert proc.returncode == 2 and proc.stderr.decode().count("\n") == 1 and "gzip-compressed" in proc.stderr.decode()


def test_watch_refuses_a_binary_or_gzipped_file_in_one_line_not_a_stall_of_its_bytes(tmp_path):
    import gzip

    proc = run_cli("watch", sys.executable, "--stall", "30")
    assert proc.returncode == 2
    assert proc.stderr.decode().strip() == (f"firedup: {sys.executable}: this is a binary file, not a log "
                                            "(NUL and control bytes in its first 8 KB)")
    packed = tmp_path / "server.log.1.gz"
    packed.write_bytes(gzip.compress(b"INFO 10-01 22:24:54 [api_server.py:1896] vLLM API server version 0.10.2\n"))
    proc = run_cli("watch", str(packed), "--stall", "30")
    assert proc.returncode == 2 and proc.stderr.decode().count("\n") == 1
    assert "gzip-compressed log" in proc.stderr.decode() and "firedup diagnose" in proc.stderr.decode()


@pytest.mark.parametrize("log", ["llama-missing-model", "llama-ready"])
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_a_log_saved_as_utf16_with_its_bom_reads_as_the_same_log(tmp_path, log, encoding):
    # PowerShell 5's "llama-server ... > log.txt": UTF-16 with a BOM, CRLF line ends
    text = (FIXTURES / "captured" / f"{log}.log").read_text()
    saved = tmp_path / "log.txt"
    saved.write_bytes(("\ufeff" if encoding == "utf-16-be" else "").encode(encoding)
                      + text.replace("\n", "\r\n").encode(encoding))
    expected = diagnose(FIXTURES / "captured" / f"{log}.log")
    verdict = diagnose(saved)
    assert (verdict.outcome, verdict.cause, verdict.evidence) == (expected.outcome, expected.cause, expected.evidence)
    watched = json.loads(run_cli("watch", str(saved), "--stall", "5", "--json").stdout.splitlines()[-1])
    assert (watched["outcome"], watched["cause"]) == (expected.outcome, expected.cause)
    assert watched["evidence"]["line"] == expected.evidence["line"]
    piped = run_cli("watch", "-", "--stall", "5", "--json", stdin=saved.read_bytes())
    plain = run_cli("watch", "-", "--stall", "5", "--json", stdin=text.encode())
    got, want = (json.loads(proc.stdout.splitlines()[-1]) for proc in (piped, plain))
    assert (got["outcome"], got["cause"], got["evidence"]["line"]) == \
        (want["outcome"], want["cause"], want["evidence"]["line"])


def test_a_utf16_log_cut_inside_a_character_keeps_what_was_cut(tmp_path):
    # a copy taken while the server wrote: the last character's second byte is missing
    saved = tmp_path / "log.txt"
    text = 'Traceback (most recent call last):\r\n  File "serve.py", line 1, in <module>\r\nValueError: caf\u00e9'
    saved.write_bytes(text.encode("utf-16")[:-1])
    verdict = diagnose(saved)
    assert verdict.evidence["line"] == "ValueError: caf\ufffd"


def test_a_log_truncated_under_its_writer_is_read_past_the_hole(tmp_path):
    # logrotate's copytruncate: the server writes on at its offset, the file starts with NULs
    log = tmp_path / "server.log"
    log.write_bytes(b"\x00" * 20000 + b"INFO:     Application startup complete.\n")
    verdict = diagnose(log, server="vllm")
    assert (verdict.outcome, verdict.evidence["line"]) == ("ready", "INFO:     Application startup complete.")


def test_benign_rules_still_outrank_others_after_many_benign_lines_while_serving():
    """After BENIGN_AFTER_READY benign lines the prefilter stops tagging benign
    lines, yet a line a benign rule reads first (a retry naming a missing repo,
    an NCCL plugin lookup) must read the same as it did before."""
    from firedup import rules
    from firedup.engine import BENIGN_AFTER_READY

    ruleset = rules.load()
    shadowing = [(r, ex) for r in ruleset.rules if r.kind == "benign" for ex in r.examples
                 if any(o.kind in ("fatal", "cause") and o.index > r.index and o.pattern.search(ex)
                        for o in ruleset.rules)]
    assert shadowing  # e.g. vLLM's 'Error retrieving safetensors' over model-not-found
    for rule, example in shadowing:
        server = None if rule.family == "generic" else rule.family
        ready = b"INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)\n"
        traffic = b'INFO:     127.0.0.1:5000 - "GET /metrics HTTP/1.1" 404 Not Found\n' * (BENIGN_AFTER_READY + 10)
        read = []
        for served in (b"", traffic):
            signals = Engine(server=server).feed(ready + served + example.encode() + b"\n")
            read.append([s.kind for s in signals if s.line.endswith(example[-40:]) and s.kind != "lines"])
        assert read[0] == read[1] and not {"fatal", "cause"} & set(read[1]), (rule.id, example, read)


def test_paths_names_and_values_are_printed_as_they_are_never_as_markup(tmp_path):
    """Rich markup or emoji codes in what a user named (a path, --name, a configuration value) are text."""
    (tmp_path / "[v1] :bug:").mkdir()
    a, b = tmp_path / "a.log", tmp_path / "[v1] :bug:" / "b.log"
    for log in (a, b):
        log.write_bytes(ARGS + READY)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # piped: long paths not folded
    proc = subprocess.run([sys.executable, "-m", "firedup", "watch", str(a), str(b), "--stall", "5"],
                          capture_output=True, env={**env, "NO_COLOR": "1"}, timeout=60)
    lines = proc.stdout.decode().splitlines()
    assert proc.returncode == 0, proc.stderr.decode()
    overall = [line for line in lines if line.startswith("overall: ready  [")]
    assert overall and f"{a}: ready" in overall[0] and f"{b}: ready" in overall[0], lines
    assert f"{a}:" in lines and f"{b}:" in lines
    with Ledger() as ledger:
        for value in ("[bold]one[/bold]", "[/tmp/x: two] :bug:"):
            ledger.record(kind="launch", name=value, outcome="ready", config={"attention_backend": value}, phases={})
    listed = run_cli("runs").stdout.decode()
    assert "[bold]one[/bold]" in listed and "[/tmp/x: two] :bug:" in listed
    changed = run_cli("diff", "3", "4")  # runs 1 and 2: the watch above
    assert changed.returncode == 0 and "[bold]one[/bold]" in changed.stdout.decode()


def test_a_gzipped_log_reads_as_the_log_it_holds_from_a_file_or_stdin(tmp_path, monkeypatch):
    """logrotate's server.log.1.gz, also several members (cat a.gz b.gz), NUL padding, small reads."""
    import gzip

    from firedup import _diagnose

    text = (FIXTURES / "captured" / "vllm-truncated-shard.log").read_bytes()
    plain = diagnose(FIXTURES / "captured" / "vllm-truncated-shard.log")
    assert plain.cause == "corrupt_checkpoint"
    half = len(text) // 2
    packed = tmp_path / "server.log.1.gz"
    packed.write_bytes(gzip.compress(text[:half]) + gzip.compress(text[half:]) + b"\x00" * 20)
    assert diagnose(packed) == plain
    proc = run_cli("diagnose", "--json", "-", stdin=packed.read_bytes())
    assert proc.returncode == 1 and json.loads(proc.stdout)["evidence"] == plain.evidence
    monkeypatch.setattr(_diagnose, "CHUNK", 1000)  # members and their text cut across reads
    assert diagnose(packed) == plain


@pytest.mark.parametrize("packer", ["bz2", "lzma"])
def test_a_bzip2_or_xz_log_reads_as_the_log_it_holds(tmp_path, monkeypatch, packer):
    """logrotate's compresscmd may be bzip2 or xz (server.log.1.bz2, .xz), also several streams and small reads."""
    import importlib

    from firedup import _diagnose

    pack = importlib.import_module(packer).compress
    text = (FIXTURES / "captured" / "vllm-truncated-shard.log").read_bytes()
    plain = diagnose(FIXTURES / "captured" / "vllm-truncated-shard.log")
    half = len(text) // 2
    packed = tmp_path / "server.log.1.packed"
    packed.write_bytes(pack(text[:half]) + pack(text[half:]))
    assert diagnose(packed) == plain
    proc = run_cli("diagnose", "--json", "-", stdin=packed.read_bytes())
    assert proc.returncode == 1 and json.loads(proc.stdout)["evidence"] == plain.evidence
    monkeypatch.setattr(_diagnose, "CHUNK", 1000)
    assert diagnose(packed) == plain


def test_a_zstd_log_and_a_damaged_xz_one_are_refused_in_one_line(tmp_path):
    import lzma

    zst = tmp_path / "server.log.zst"
    zst.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 40)
    proc = run_cli("diagnose", str(zst))
    assert proc.returncode == 2 and "zstd -d" in proc.stderr.decode() and proc.stderr.decode().count("\n") == 1
    damaged = tmp_path / "server.log.xz"
    packed = lzma.compress(ARGS * 50)
    damaged.write_bytes(packed[:40] + bytes(b ^ 0xFF for b in packed[40:80]) + packed[80:])
    proc = run_cli("diagnose", str(damaged))
    assert proc.returncode == 2 and "damaged compressed data" in proc.stderr.decode()
    assert proc.stderr.decode().count("\n") == 1
    # a text log that happens to begin with bzip2's letters is a log
    text = tmp_path / "bzh.log"
    text.write_bytes(b"BZh stands for nothing here\n" + ARGS)
    assert diagnose(text).outcome == "incomplete"


def test_a_gzipped_file_cut_short_gives_what_it_holds_and_a_damaged_one_one_line(tmp_path):
    import gzip

    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(gzip.compress(ARGS * 200 + READY)[:-30])  # the end of the ready line and the trailer lost
    verdict = diagnose(cut)
    assert verdict.outcome == "incomplete" and verdict.evidence["lineno"] > 100
    damaged = tmp_path / "damaged.log.gz"
    damaged.write_bytes(gzip.compress(ARGS)[:10] + b"\xff" * 50)
    proc = run_cli("diagnose", str(damaged))
    assert proc.returncode == 2 and proc.stderr.decode().startswith(f"firedup: {damaged}: damaged gzip data (")
    assert proc.stderr.decode().count("\n") == 1


def test_a_gzipped_binary_file_is_still_refused(tmp_path):
    import gzip

    packed = tmp_path / "python.gz"
    packed.write_bytes(gzip.compress(Path(sys.executable).read_bytes()[:100_000]))
    proc = run_cli("diagnose", str(packed))
    assert proc.returncode == 2 and "this is a binary file, not a log" in proc.stderr.decode()


def test_a_safetensors_file_is_refused_in_one_line(tmp_path):
    """Its JSON header passes for text: read as a log it was "incomplete", its tensors' bytes the evidence."""
    header = json.dumps({"__metadata__": {"format": "pt"}, "w": {"dtype": "F32", "shape": [4096, 4096],
                                                                  "data_offsets": [0, 4096 * 4096 * 4]}}).encode()
    weights = tmp_path / "model-00003-of-00012.safetensors"
    weights.write_bytes(len(header).to_bytes(8, "little") + header + bytes(range(256)) * 400)
    proc = run_cli("diagnose", str(weights))
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.decode() == f"firedup: {weights}: this is a safetensors weight file, not a log\n"
