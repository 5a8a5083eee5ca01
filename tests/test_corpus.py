"""Every labelled real log, run through diagnose: the shared corpus beside this
clone, and the logs users posted publicly that this repo keeps
(tests/fixtures/reported, each with the source it came from). The library
call, not a `firedup diagnose --json` process a log: the same verdict, in a
hundredth of the time (the CLI's --json on real logs is test_captured's)."""

import json
import re

import pytest

from firedup import Outcome, diagnose
from firedup.judge import copy_key
from firedup.lines import clean, from_json, parse
from firedup.rules import CAUSES

from .conftest import FIXTURES, corpus_logs, needs_corpus, run_cli

LOGS = corpus_logs()
REPORTED = sorted(p for p in (FIXTURES / "reported").glob("*.log") if p.with_suffix(".json").exists())
KNOWN_MISSES = {line for line in (FIXTURES / "reported" / "known-misses.txt").read_text().split("\n")
                if line and not line.startswith("#")}


@needs_corpus()
@pytest.mark.parametrize("log", LOGS, ids=[p.stem for p in LOGS])
def test_corpus_log(log):
    check(log)


@pytest.mark.parametrize("log", [
    pytest.param(p, marks=pytest.mark.xfail(strict=True, reason="known miss")) if p.stem in KNOWN_MISSES else p
    for p in REPORTED], ids=[p.stem for p in REPORTED])
def test_reported_log(log):
    check(log)


def test_the_cli_says_what_the_library_says():
    """`firedup diagnose --json` on a ready, a failed and a hung real log: the
    library's verdict, its exit code, nothing on stderr."""
    labels = {p: json.loads(p.with_suffix(".json").read_text())["outcome"] for p in REPORTED
              if p.stem not in KNOWN_MISSES}
    for outcome in ("ready", "failed", "hung"):
        log = next(p for p, label in labels.items() if label == outcome)
        proc = run_cli("diagnose", "--json", str(log))
        assert proc.stderr == b"" and json.loads(proc.stdout) == json.loads(json.dumps(diagnose(str(log)).to_dict()))
        assert proc.returncode == Outcome(json.loads(proc.stdout)["outcome"]).exit_code


def test_known_misses_are_reported_logs():
    assert KNOWN_MISSES <= {p.stem for p in REPORTED}


def check(log):
    """The verdict agrees with the label, or with one of the other readings
    its sidecar records ("also": a cause or evidence line another careful
    reader of the same log would give, and why). The outcome has one reading."""
    label = json.loads(log.with_suffix(".json").read_text())
    verdict = diagnose(str(log))
    got = json.loads(json.dumps(verdict.to_dict(), ensure_ascii=False))  # as --json prints it
    readings = [label] + [{**label, **other} for other in label.get("also", [])]
    for reading in readings[:-1]:
        try:
            return agrees(log, reading, verdict, got)
        except AssertionError:
            continue
    agrees(log, readings[-1], verdict, got)


def agrees(log, label, verdict, got):
    if label["outcome"] == "hung":
        assert got["outcome"] in ("stalled", "incomplete")
        assert got["cause"] is None
    else:
        assert got["outcome"] == label["outcome"]
        assert got["cause"] == label["cause"]
    assert verdict.code == Outcome(got["outcome"]).exit_code
    assert got["evidence"]["line"] == clean(label["evidence_line"])
    physical = log.read_bytes().decode("utf-8", "replace").split("\n")[got["evidence"]["lineno"] - 1]
    assert got["evidence"]["line"] in clean(physical)

    ignored = {b["line"] for b in got["benign"]}
    copies = {copy_key(line) for line in ignored}  # the benign list keeps one copy of a message
    # The batches gathered later (a "gathered" date) list every line that looks
    # alarming to a reader (a 503 health probe, "HTTP server is listening"):
    # none may decide the verdict; the first batch's, labelled by the verdict's
    # own rule for what is listed as ignored, must also be listed.
    listed = "gathered" not in label
    for scary in label["benign_scary_lines"]:
        # a hang's last line may be a harmless one: where the start got
        assert clean(scary) != got["evidence"]["line"] or label["outcome"] == "hung"
        assert not listed or clean(scary) in ignored or copy_key(clean(scary)) in copies, \
            f"benign line not reported as ignored: {scary!r}"

    if label["server"] != "other" and got["server"] is not None:
        assert got["server"] == label["server"]


@needs_corpus()
def test_corpus_is_not_empty():
    assert len(LOGS) >= 20


def test_reported_corpus():
    """Enough logs, each with a public source and a date (the held-out split sorts by it)."""
    assert len(REPORTED) >= 250
    for log in REPORTED:
        label = json.loads(log.with_suffix(".json").read_text())
        assert label["source"].startswith("https://"), log.name
        assert label["date"] and label["server"] in {"vllm", "sglang", "llamacpp", "tgi", "trtllm", "lmdeploy"}
        assert label["outcome"] in ("ready", "failed", "hung"), log.name
        lines = {clean(line) for line in log.read_text(errors="replace").splitlines()}
        for other in label.get("also", []):
            # another reading of the cause or the evidence, never of the outcome, and why
            assert other.keys() <= {"cause", "evidence_line", "why"} and other.get("why"), log.name
            assert "cause" not in other or other["cause"] in CAUSES, log.name
            assert "evidence_line" not in other or clean(other["evidence_line"]) in lines, log.name


# How the same log reaches a user from other machines: kubectl logs --timestamps or
# --prefix, stern, kubetail, a Ray task's prefix, docker service logs, Slurm's srun --label,
# a launch script's `| ts`, docker compose's (and podman-compose's) service column, pm2's,
# journalctl/syslog, an export's timestamp and tab, a file's line numbers (cat -n), a Python wrapper's
# logger, Windows line ends.
REWRITES = {
    "kubectl": lambda line: "2026-05-01T10:00:00.123456789Z " + line,
    "kubectl-prefix": lambda line: "[pod/vllm-7d9c6b5f4-x2k8p/vllm] 2026-05-01T10:00:00.123456789Z " + line,
    "srun-label": lambda line: "0: " + line,
    "moreutils-ts": lambda line: "Dec 02 01:51:33 " + line,
    "compose": lambda line: "vllm-1  | " + line,
    "pm2": lambda line: "0|vllm     | " + line,  # pm2 logs: its process id and name
    "podman-compose": lambda line: "[vllm] | " + line,
    "stern": lambda line: "vllm-7d9c6b5f4-x2k8p vllm " + line,  # stern's pod and container
    "kubetail": lambda line: "[vllm-7d9c6b5f4-x2k8p] " + line,
    "ray-task": lambda line: "(pid=4242, ip=10.0.0.2) " + line,  # a Ray task's output on the driver
    "ray-colour-unescaped": lambda line: "[36m(pid=4242)[0m " + line,  # its colour codes pasted without ESC
    "windows-console": lambda line: "←[36m(RayWorkerWrapper pid=365)←[0m " + line,  # ESC shown as ←
    "caret-notation": lambda line: "^[[1;36m(pid=7)^[[0;0m " + line,  # ESC as cat -v shows it
    "line-numbers": lambda line: "    12\t" + line,  # cat -n
    "swarm": lambda line: "vllm.1.8o9x2x9k3m1q@node1    | " + line,  # docker service logs
    "timestamp-tab": lambda line: "2026-05-01T10:00:00.123Z\t" + line,  # an export: its time, a tab, the line
    "journald": lambda line: "Dec  1 10:00:00 gpu01 vllm[1234]: " + line,
    "journald-no-host": lambda line: "Mar 18 11:23:46 sglang-router[931930]: " + line,
    "python-logging": lambda line: "INFO:tgi-server:" + line,  # a wrapper relaying the server's lines
    "buildkite": lambda line: "[2025-05-23T04:39:51Z] " + line,  # a CI job's log (vLLM's CI)
    "crlf": lambda line: line + "\r",
}


@pytest.mark.parametrize("how", sorted(REWRITES))
def test_a_log_from_another_machine_gets_the_same_verdict(how):
    """Every third reported log, each line behind another host's prefix (or
    with CRLF line ends): the same outcome, cause and evidence line."""
    import io

    rewrite = REWRITES[how]
    changed = []
    for log in REPORTED[::3]:
        if log.stem in KNOWN_MISSES:
            continue
        lines = log.read_bytes().decode("utf-8", "replace").split("\n")
        want, got = diagnose(str(log)), diagnose(io.BytesIO("\n".join(rewrite(x) if x else x for x in lines).encode()))
        if (got.outcome, got.cause) != (want.outcome, want.cause) or \
                (got.evidence or {}).get("lineno") != (want.evidence or {}).get("lineno"):
            changed.append(f"{log.stem}: {want.outcome}/{want.cause} -> {got.outcome}/{got.cause}")
    assert not changed, changed


@pytest.mark.parametrize("name", [
    "vllm-2026-gemma4-31b-flashinfer-max-mma-kv-warmup-fail",  # a warning-level ImportError before the failure
    "vllm-ascend-0.7.3rc2-engine-process-plugin-import-fails-failed-to-infer-device-type",  # begins on an exception
])
def test_a_log_pasted_indented_gets_the_same_verdict(name):
    """A log indented as a markdown code block: the judge reads each line's level
    under the indent (a warning stays a warning), and a first line that gives no
    indent to take leaves the next to decide."""
    import io

    log = FIXTURES / "reported" / f"{name}.log"
    lines = log.read_bytes().decode("utf-8", "replace").split("\n")
    want, got = diagnose(str(log)), diagnose(io.BytesIO("\n".join("    " + x if x else x for x in lines).encode()))
    assert (got.outcome, got.cause, got.evidence["lineno"]) == (want.outcome, want.cause, want.evidence["lineno"])


# TGI's --json-output (as Kubernetes deployments run it): one JSON record per
# event, a multi-line message (a shard's traceback) inside one record.
_TGI_RECORD = re.compile(r"^(\d{4}-\d\d-\d\dT[\d:.]+Z)\s+(TRACE|DEBUG|INFO|WARN|ERROR)\s+"
                         r"(?:([\w-]+)(?:\{[^}]*\})?: )?(text_generation_\w+(?:::\w+)*): (.*)$")


def _as_tgi_json(text: str) -> str:
    out: list[str] = []
    record: dict | None = None
    for line in text.split("\n"):
        m = _TGI_RECORD.match(line)
        if m is None and record is not None and line.strip():
            record["fields"]["message"] += "\n" + line
            continue
        if record is not None:
            out.append(json.dumps(record))
            record = None
        if m is None:
            out.append(line)
            continue
        stamp, level, span, target, message = m.groups()
        record = {"timestamp": stamp, "level": level, "fields": {"message": message}, "target": target}
        if span:
            record["span"] = {"name": span}
    if record is not None:
        out.append(json.dumps(record))
    return "\n".join(out)


def test_a_tgi_log_written_as_json_gets_the_same_verdict():
    """Every reported TGI log, rewritten as TGI's --json-output would have
    printed it: the same outcome, cause and evidence message (the evidence
    being the record that holds it, the line the file has)."""
    import io

    changed, rewritten = [], 0
    for log in REPORTED:
        if not log.name.startswith("tgi-") or log.stem in KNOWN_MISSES:
            continue
        text = log.read_text(errors="replace")
        if '"target":"text_generation' in text:
            continue  # written with --json-output already
        as_json = _as_tgi_json(text)
        if as_json.count('"fields"') < 3:
            continue  # a paste with too few of TGI's own records to say anything
        rewritten += 1
        want, got = diagnose(str(log)), diagnose(io.BytesIO(as_json.encode()))
        said = parse((want.evidence or {}).get("line", "")).message
        record = (got.evidence or {}).get("line", "")
        if (got.outcome, got.cause) != (want.outcome, want.cause) \
                or said not in [parse(piece).message for piece in from_json(record) or [record]]:
            changed.append(f"{log.stem}: {want.outcome}/{want.cause} -> {got.outcome}/{got.cause}")
    assert rewritten >= 15 and not changed, changed


def test_a_window_from_inside_a_workers_traceback_to_a_later_bar_reads_the_failure():
    """The last 2,000 bytes of a vLLM log, as an issue's excerpt cuts it: inside
    a worker's traceback (CUDA OOM in graph capture), then another worker's bar
    glued to a later line. The bar's first reading, in a phase the window never
    saw begin, does not say start-up went on past the error."""
    import io

    log = FIXTURES / "reported" / "vllm-0190-tp4-sm86-qwen35-9b-cudagraph-capture-oom-then-shm-wait.log"
    tail = log.read_bytes()[-2000:]
    v = diagnose(io.BytesIO(tail[tail.index(b"\n") + 1:]))
    assert (v.outcome, v.cause) == ("failed", "cuda_oom")
    assert clean(v.evidence["line"]).endswith("torch.AcceleratorError: CUDA error: out of memory")


def test_a_server_that_loads_tensorrt_llm_first_is_named_by_its_own_lines_and_not_given_its_version():
    """NVIDIA NIM's vLLM frontend starts TensorRT-LLM before it says anything:
    TensorRT-LLM's lines and version come first, then vLLM's (in JSON records
    whose file paths name it). The server is vLLM, and TensorRT-LLM's version
    is not the server's."""
    failed = diagnose(str(FIXTURES / "reported" / "nim-llm-1.0.0-gt710-k8s-cuda-no-device.log"))
    ready = diagnose(str(FIXTURES / "reported" / "nim-llm-1.0.0-vllm-l4-gke-ready-json-logs.log"))
    assert (failed.server, failed.version, failed.cause) == ("vllm", None, "gpu_unavailable")
    assert (ready.server, ready.version, ready.outcome) == ("vllm", "0.4.1", Outcome.READY)
