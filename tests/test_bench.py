"""firedup bench: metric definitions, the client on a zero-work server, compare."""

import asyncio
import gc
import json
import math
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

import firedup
from firedup import BenchFailed
from firedup.bench.compare import aggregate, classify, compare, gatekept, holm, pvalue, t_pvalue, workload_differences
from firedup.bench.metrics import RequestResult, compute, percentile
from firedup.bench.prompts import WORDS, ServerTokenizer, Tokenizer, fitted, from_tokenizer, lengths
from firedup.bench.run import calibrate, parse_prometheus, speculative, timing_problems
from firedup.bench.workload import Workload, WorkloadError, load_dataset
from firedup.ledger.store import Ledger

from .conftest import run_cli, zero_server


def test_percentile_interpolates_like_numpy():
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert percentile(values, 50) == 3.0
    assert percentile(values, 99) == pytest.approx(9.76)  # numpy.percentile(values, 99)
    assert percentile(values, 0) == 1.0 and percentile([], 99) == 0.0


def test_metric_definitions_follow_vllm_bench_serve():
    results = [
        RequestResult(ok=True, start=0.0, latency=1.0, ttft=0.1, itl=[0.3, 0.3, 0.3], prompt_tokens=10,
                      output_tokens=4, chunks=4),
        RequestResult(ok=True, start=0.5, latency=2.0, ttft=0.2, itl=[0.9, 0.9], prompt_tokens=20,
                      output_tokens=3, chunks=3),
        RequestResult(ok=False, start=1.0, error="HTTP 500"),
    ]
    m = compute(results, duration=4.0, percentiles=[50, 99], goodput={"ttft": 150})
    assert (m["completed"], m["failed"], m["total_input_tokens"], m["total_output_tokens"]) == (2, 1, 30, 7)
    assert m["request_throughput"] == 0.5 and m["output_throughput"] == 1.75 and m["total_token_throughput"] == 9.25
    assert m["request_goodput"] == 0.25  # only the first meets ttft <= 150 ms
    assert m["mean_ttft_ms"] == pytest.approx(150.0) and m["median_ttft_ms"] == pytest.approx(150.0)
    assert m["std_ttft_ms"] == pytest.approx(50.0)  # population std, as numpy
    assert m["mean_tpot_ms"] == pytest.approx((300.0 + 900.0) / 2)  # (latency - ttft) / (tokens - 1)
    assert m["mean_itl_ms"] == pytest.approx(statistics.fmean([300, 300, 300, 900, 900]))
    assert m["p50_e2el_ms"] == pytest.approx(1500.0) and "p99_itl_ms" in m
    # tokens at 0.1, 0.4, 0.7, 1.0 s and 0.7, 1.6, 2.5 s; requests active over [0, 1] and [0.5, 2.5]
    assert m["max_output_tokens_per_s"] == 4 and m["max_concurrent_requests"] == 2


def test_client_against_a_zero_work_server_counts_tokens_from_usage():
    result = calibrate(Workload(concurrency=8, num_prompts=200, input_len=8, output_len=32, warmup=1))
    m = result.metrics
    assert m["completed"] == 200 and m["failed"] == 0
    assert m["total_output_tokens"] == 200 * 32
    assert all(r["chunks"] == r["output_tokens"] == 32 for r in result.requests)
    assert all(len(r["itl"]) == 31 for r in result.requests)
    assert not result.warnings


def test_request_rate_is_achieved_and_checked():
    result = calibrate(Workload(request_rate=50, num_prompts=100, input_len=8, output_len=8, warmup=0))
    health = result.health
    assert health["target_rate"] == 50 and health["drawn_rate"] == pytest.approx(50, rel=0.35)
    # (not health["valid"]: on a loaded machine the client's own lag is rightly flagged)
    assert health["achieved_rate"] == pytest.approx(health["drawn_rate"], rel=0.05)
    assert result.metrics["completed"] == 100


SGLANG_METRICS = """\
# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{dp_rank="0",model_name="m"} 3.5
sglang:spec_accept_length{dp_rank="1",model_name="m"} 2.5
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{dp_rank="0",model_name="m"} 0.8
sglang:spec_accept_rate{dp_rank="1",model_name="m"} 0.6
sglang:generation_tokens_total{model_name="m"} 8.0
"""


def test_speculative_acceptance_from_vllm_counters_and_sglang_gauges():
    before = parse_prometheus('vllm:spec_decode_num_drafts_total{engine="0"} 10\n'
                              'vllm:spec_decode_num_draft_tokens_total{engine="0"} 30\n'
                              'vllm:spec_decode_num_accepted_tokens_total{engine="0"} 12\n'
                              'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 7\n'
                              'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 5\n')
    after = parse_prometheus('# TYPE vllm:spec_decode_num_drafts_total counter\n'
                             'vllm:spec_decode_num_drafts_total{engine="0"} 60\n'
                             'vllm:spec_decode_num_draft_tokens_total{engine="0"} 180\n'
                             'vllm:spec_decode_num_accepted_tokens_total{engine="0"} 112\n'
                             'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 47\n'
                             'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 35 '
                             '1700000000\n')
    s = speculative(before, after)  # as vllm bench serve defines them
    assert s["acceptance_rate"] == pytest.approx(100 * 100 / 150) and s["acceptance_length"] == pytest.approx(3.0)
    assert s["per_position_acceptance_rates"] == pytest.approx([40 / 50, 30 / 50])
    s = speculative({}, parse_prometheus(SGLANG_METRICS))  # gauges: averaged over the ranks
    assert s["acceptance_length"] == pytest.approx(3.0) and s["acceptance_rate"] == pytest.approx(70.0)
    assert speculative(after, after) is None
    assert speculative({}, parse_prometheus(SGLANG_METRICS.replace("3.5", "0").replace("2.5", "0"))) is None


def test_datasets(tmp_path):
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"prompt": "hello", "output_len": 5}\n{"prompt": "world"}\n')
    assert load_dataset(str(jsonl), 7)[0] == [("hello", 5), ("world", 7)]
    share = tmp_path / "sharegpt.json"
    share.write_text(json.dumps([{"conversations": [{"from": "human", "value": "hi there"},
                                                    {"from": "gpt", "value": "one two three"}]}]))
    assert load_dataset(str(share), 7)[0] == [("hi there", 3)]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(WorkloadError):
        load_dataset(str(bad), 7)
    bad.write_bytes(b'{"prompt": "\xff\xfe"}\n')  # not UTF-8: a clear error, not a traceback
    with pytest.raises(WorkloadError, match="neither JSONL"):
        load_dataset(str(bad), 7)
    bad.write_text('{"prompt": "hello"}\n\n{"output_len": 3}\n')  # a line without its prompt is not skipped
    with pytest.raises(WorkloadError, match=f'^{bad}, line 3: no "prompt" \\(a string\\): {{"output_len": 3}}$'):
        load_dataset(str(bad), 7)
    assert len(Workload(num_prompts=5, dataset=str(jsonl)).dataset_prompts()) == 5
    before = Workload(dataset=str(jsonl)).describe()
    jsonl.write_text('{"prompt": "hello again"}\n')  # same path, other prompts: not the same workload
    assert before["dataset_sha256"] != Workload(dataset=str(jsonl)).describe()["dataset_sha256"]


def test_noise_is_told_from_a_change():
    assert t_pvalue(2.776, 4) == pytest.approx(0.05, abs=1e-4)  # Student's t tables, two-sided 95%
    assert t_pvalue(12.706, 1) == pytest.approx(0.05, abs=1e-4) and t_pvalue(0.0, 3) == pytest.approx(1.0)
    down = pvalue([100, 101, 99], [90, 91, 89], paired=False)
    assert down < 0.001 and classify(-10.0, down, higher_is_better=True) == "regression"
    assert classify(+100.0, down, higher_is_better=False) == "regression"  # latency up
    assert classify(+10.0, down, higher_is_better=True) == "improvement"
    assert classify(0.3, pvalue([100, 101, 99], [100.5, 99.5, 101], paired=False), True) == "within noise"
    assert classify(-1.0, pvalue([100, 110, 90], [82, 120, 101], paired=False), True) == "within noise"
    # Two launches of the same transformers serve, 3 repeats each (tok/s): 2 sigmas said "improvement"
    assert pvalue([322.6, 362.6, 363.6], [384.9, 394.2, 417.9], paired=False) > 0.05
    # A noise that multiplies: starts at half and at double speed; as ratios the 4x gain is steady
    assert pvalue([10, 40, 20], [40, 160, 80], paired=True) == 0.0 < pvalue([10, 40, 20], [40, 160, 80], paired=False)
    assert pvalue([100], [90], paired=False) is None and classify(-10.0, None, True).startswith("noise unknown")
    # Sure, but smaller than the minimum effect worth calling
    small = pvalue([100, 100.1, 99.9], [97, 97.1, 96.9], paired=False)
    assert small < 0.001 and classify(-3.0, small, True) == "below 5%"
    assert classify(-3.0, small, True, 2.0) == "regression"


def test_the_family_wise_error_is_held_over_the_metrics():
    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm([0.001]) == [0.001]
    # throughput is the gate: the others are tested (with Holm) only when it changed
    assert gatekept({"output_throughput": 0.01, "a": 0.01, "b": 0.04}) == pytest.approx(
        {"output_throughput": 0.01, "a": 0.02, "b": 0.04})
    assert gatekept({"output_throughput": 0.2, "a": 0.001}) == {"output_throughput": 0.2, "a": 0.2}
    assert gatekept({"a": 0.01, "b": 0.04}) == pytest.approx({"a": 0.02, "b": 0.04})


def test_pairs_of_interleaved_starts_cancel_drift():
    """The machine slows down start by start, on both configurations alike:
    as two separate runs the drift drowns a steady 2% gain; paired, it does not."""
    a = [100.0, 90.0, 80.0, 70.0]
    b = [102.1, 91.7, 81.6, 71.5]
    assert pvalue(a, b, paired=False) > 0.5
    assert pvalue(a, b, paired=True) < 0.001


def _bench_run(ledger, **overrides):
    ttft = overrides.pop("ttft", None) or [50.0] * len(overrides["throughput"])
    metrics = aggregate([{"output_throughput": v, "mean_ttft_ms": t, "client": "firedup 0.1.0", "model": "m"}
                         for v, t in zip(overrides.pop("throughput"), ttft)])
    metrics["repeats_across"] = overrides.pop("repeats_across", "server starts")
    if "interleaved" in overrides:
        metrics["interleaved"] = overrides.pop("interleaved")
    workload = {**Workload(concurrency=4).describe(), **overrides.pop("workload", {})}
    return ledger.record(kind="bench", outcome="ready", workload=workload, metrics=metrics, **overrides)


def test_compare_shows_deltas_noise_and_what_changed():
    with Ledger() as ledger:
        a = _bench_run(ledger, throughput=[89.5, 89.0, 90.1], config={"attention_backend": "flashinfer"},
                       environment={"packages": {"torch": "2.8.0"}})
        b = _bench_run(ledger, throughput=[83.9, 84.2, 83.5], config={"attention_backend": "triton"},
                       environment={"packages": {"torch": "2.9.1"}})
        c = _bench_run(ledger, throughput=[83.9], workload={"input_len": 1024})
        report = compare([ledger.get(a), ledger.get(b)])
        assert workload_differences(ledger.get(a), ledger.get(c)) == [("input_len", 256, 1024)]
    row = next(r for r in report["rows"] if r["metric"] == "output_throughput")
    change = row["changes"][0]
    assert change["verdict"] == "regression" and change["delta_pct"] == pytest.approx(-6.3, abs=0.1)
    keys = {(c["key"], c["a"], c["b"]) for c in report["changes"][0]}
    assert ("attention_backend", "flashinfer", "triton") in keys and ("torch", "2.8.0", "2.9.1") in keys
    assert len(report["notes"]) == 1 and "not interleaved" in report["notes"][0]  # drift is not told from an effect
    with Ledger() as ledger:
        d = _bench_run(ledger, throughput=[89.5, 89.0, 90.1], repeats_across="one server start")
        e = _bench_run(ledger, throughput=[83.9, 84.2, 83.5], repeats_across="one server start")
        notes = compare([ledger.get(d), ledger.get(e)])["notes"]
    assert len(notes) == 2 and "--relaunch" in notes[1] and f"run {d}, {e}" in notes[1]
    text = run_cli("compare", str(a), str(b)).stdout.decode()
    assert text.startswith(f"run {b} against run {a}: regression (output_throughput -6.3%, p 0.0")
    assert "attention_backend flashinfer → triton" in text
    refused = run_cli("compare", str(a), str(c))
    assert refused.returncode == 2 and "different workloads" in refused.stderr.decode()
    assert run_cli("compare", "--force", str(a), str(c)).returncode == 0


def test_compare_pairs_interleaved_runs_and_corrects_for_many_metrics():
    with Ledger() as ledger:
        def pair(throughput_b, ttft_b, group):
            ids = {"group": group, "order": "ABBA"}
            a = _bench_run(ledger, throughput=[100, 90, 95, 85], ttft=[50, 52, 51, 53],
                           interleaved={**ids, "side": "A"}, repeats_across="interleaved server starts")
            b = _bench_run(ledger, throughput=throughput_b, ttft=ttft_b,
                           interleaved={**ids, "side": "B"}, repeats_across="interleaved server starts")
            report = compare([ledger.get(a), ledger.get(b)])
            return a, b, report, {r["metric"]: r["changes"][0] for r in report["rows"]}

        # interleaved A/A: TTFT alone at p ~ 0.03, but throughput, the gate, did not change: nothing called
        a, b, report, rows = pair([106, 90, 103, 88], [53, 53, 55, 55], "g1")
        ttft_alone = pvalue([50, 52, 51, 53], [53, 53, 55, 55], paired=True)
        assert ttft_alone < 0.05 < rows["output_throughput"]["p"] == rows["mean_ttft_ms"]["p"]
        # TTFT's own test would call it, the gate held it back; +4.9% is under the minimum effect anyway
        assert {c["verdict"] for c in rows.values()} == {"within noise"}
        assert rows["mean_ttft_ms"]["held_by_gate"] and rows["mean_ttft_ms"]["p_own"] == pytest.approx(ttft_alone)
        assert report["tests"] == [{"paired": True, "correction": "output_throughput first, then holm", "alpha": 0.05,
                                    "min_effect_pct": 5.0, "metrics_tested": 2, "hypotheses": 2}]
        assert report["notes"] == []  # interleaved: nothing to warn about
        text = run_cli("compare", str(a), str(b), "--min-effect", "3").stdout.decode()
        assert "paired t-test over interleaved starts" in text and "≥ 3%" in text
        # the conclusion first: a Δ the noise explains is no finding, however large
        assert text.startswith(f"run {b} against run {a}: no change beyond noise (output_throughput +4.6%, p 0.087)")
        # TTFT up 20% where throughput held: not "within noise" (its spread is small), but not tested
        _, _, _, rows = pair([106, 90, 103, 88], [61, 62, 61, 64], "g1b")
        assert rows["output_throughput"]["verdict"] == "within noise"
        assert rows["mean_ttft_ms"]["verdict"] == "not tested (output_throughput unchanged)"
        # throughput up 10% at every pair: called; then TTFT is tested, sure but under the minimum effect
        _, _, report, rows = pair([110, 99, 104.5, 93.5], [53, 53, 55, 55], "g2")
        assert rows["output_throughput"]["verdict"] == "improvement"
        assert rows["mean_ttft_ms"]["p"] == pytest.approx(ttft_alone) and rows["mean_ttft_ms"]["verdict"] == "below 5%"
        # the A/A numbers, not interleaved: Welch's test, and the note
        c = _bench_run(ledger, throughput=[100, 90, 95, 85])
        d = _bench_run(ledger, throughput=[106, 90, 103, 88])
        report = compare([ledger.get(c), ledger.get(d)])
        assert report["tests"][0]["paired"] is False and "drift" in report["notes"][0]
        assert all(c["verdict"] != "improvement" for r in report["rows"] for c in r["changes"])


LATENCIES = ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
             "mean_itl_ms", "p99_itl_ms", "mean_e2el_ms", "p99_e2el_ms")


def test_throughputs_of_one_duration_are_one_test_and_get_one_call():
    """Requests, output tokens and all tokens over the same duration move by the same ratio in every pair:
    one hypothesis, not three. Counted apart, Holm's correction over the latencies called output throughput
    a regression (the gate) and request throughput, the same -42.5%, within noise."""
    with Ledger() as ledger:
        def side(name, durations, latencies):
            ids = {"group": "g", "order": "ABBA", "side": name}
            metrics = aggregate([{"output_throughput": 383 / d, "request_throughput": 12 / d,
                                  "total_token_throughput": (383 + 2400) / d, "client": "firedup 0.1.0",
                                  "model": "m", **{key: v * k + i * k * k for k, key in enumerate(LATENCIES, 1)}}
                                 for i, (d, v) in enumerate(zip(durations, latencies))])
            metrics.update(interleaved=ids, repeats_across="interleaved server starts")
            return ledger.record(kind="bench", outcome="ready", workload=Workload(concurrency=1).describe(),
                                 metrics=metrics)

        a, b = side("A", [0.566, 0.463], [20.0, 21.0]), side("B", [1.033, 0.775], [18.0, 24.0])
        report = compare([ledger.get(a), ledger.get(b)])
    rows = {r["metric"]: r["changes"][0] for r in report["rows"]}
    throughputs = [rows[m] for m in ("output_throughput", "request_throughput", "total_token_throughput")]
    assert [c["verdict"] for c in throughputs] == ["regression"] * 3 and len({c["p"] for c in throughputs}) == 1
    assert report["tests"][0]["metrics_tested"] == 13 and report["tests"][0]["hypotheses"] == 11
    text = " ".join(run_cli("compare", str(a), str(b)).stdout.decode().split())  # as one line, unwrapped
    assert "(11 tests: request_throughput, total_token_throughput share output_throughput's" in text


def test_bench_cli_plots_and_records(tmp_path):
    png = tmp_path / "bench.png"
    proc = run_cli("bench", "--calibrate", "--concurrency", "4", "--num-prompts", "100", "--output-len", "16",
                   "--input-len", "8", "--json", "--plot", str(png))
    out = json.loads(proc.stdout)
    assert out["completed"] == 100 and out["failed"] == 0 and "health" in out
    assert out["output_lens"] == [16] * 100 and len(out["ttfts"]) == len(out["itls"]) == 100  # vllm's result lists
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    second = json.loads(run_cli("bench", "--calibrate", "--concurrency", "4", "--num-prompts", "100",
                                "--output-len", "16", "--input-len", "8", "--json").stdout)
    compared = run_cli("compare", str(out["run_id"]), str(second["run_id"]), "--plot", str(tmp_path / "c.png"))
    assert compared.returncode == 0 and (tmp_path / "c.png").exists()
    # a calibration is the client's ceiling: compared with calibrations only, and it takes no server
    with Ledger() as ledger:
        server = _bench_run(ledger, throughput=[100.0])
    mixed = run_cli("compare", str(out["run_id"]), str(server))
    assert mixed.returncode == 2 and "is the client's calibration against a zero-work server" in mixed.stderr.decode()
    aimed = run_cli("bench", "--calibrate", "http://127.0.0.1:9")
    assert aimed.returncode == 2 and aimed.stderr.decode().startswith("firedup: --calibrate measures the client")


def test_bench_usage_errors(tmp_path):
    assert run_cli("bench").returncode == 2
    assert run_cli("bench", "no-such-server").returncode == 2
    proc = run_cli("bench", "http://127.0.0.1:9/", "--num-prompts", "1", "--warmup", "0")
    assert proc.returncode == 2 and proc.stderr.decode().startswith("firedup:")
    assert run_cli("bench", "--calibrate", "--goodput", "speed:3").returncode == 2
    for url, said in (("http://[::1", "not a URL firedup can reach: http://[::1 (Invalid IPv6 URL)"),
                      ("http://127.0.0.1:99999", "not a URL firedup can reach: http://127.0.0.1:99999 (Port out of"),
                      ("http://127.0.0.1:abc", "not a URL firedup can reach: http://127.0.0.1:abc (Port could not"),
                      ("http://", "no host in the URL http:// (http://HOST:PORT)"),
                      ("http://nonexistent.invalid:8000", "cannot resolve the host nonexistent.invalid: ")):
        proc = run_cli("bench", url, "--num-prompts", "1", "--warmup", "0")
        assert proc.returncode == 2 and proc.stderr.decode().startswith(f"firedup: {said}"), proc.stderr
    for bad in (("--repeat", "1", "--", "a", "--vs", "b"), ("--repeat", "2", "--", "--vs", "b"),
                ("--repeat", "2", "--", "a", "--vs", "b", "--vs", "c")):
        proc = run_cli("run", *bad)
        assert proc.returncode == 2 and len(proc.stderr.decode().splitlines()) == 1, proc.stderr


def test_bench_of_a_stopped_server_or_of_a_urls_run():
    """bench NAME of a server that ended is refused in one line; bench RUN of a bench of a bare URL
    measures that URL (here nothing listens: one line, exit 2)."""
    from firedup import registry
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    registry.Record(name="l1", pid=int(gone.stdout), argv=["srv"], log="/dev/null", url="http://127.0.0.1:9",
                    server=None, started=time.time(), created=time.time(), stopped=time.time()).save()
    proc = run_cli("bench", "l1", "--num-prompts", "1")
    assert proc.returncode == 2 and proc.stderr.decode().startswith("firedup: l1 is not running (it ended or was "), \
        proc.stderr
    with Ledger() as ledger:
        run = ledger.record(kind="bench", name="http://127.0.0.1:9", outcome="ready", workload={}, metrics={})
    proc = run_cli("bench", str(run), "--num-prompts", "1", "--warmup", "0")
    assert proc.returncode == 2 and "nothing is listening at http://127.0.0.1:9" in proc.stderr.decode(), proc.stderr


@pytest.mark.parametrize("args, message", [
    (["--percentiles", "abc"], "error: argument --percentiles: not a number: 'abc'"),
    (["--percentiles", "50,150"], "error: argument --percentiles: a percentile is between 0 and 100, not 150"),
    (["--percentiles", "-1"], "error: argument --percentiles: a percentile is between 0 and 100, not -1"),
    (["--percentiles", "nan"], "error: argument --percentiles: a percentile is between 0 and 100, not nan"),
    (["--request-rate", "1", "--burstiness", "inf"],
     "error: argument --burstiness: must be a finite number more than 0, not inf"),
    (["--request-rate", "inf", "--duration", "5"],
     "firedup: --request-rate inf sends every request at once: give --num-prompts, not --duration "
     "(or --concurrency N --duration S)"),
])
@pytest.mark.parametrize("command", ["bench", "run"])
def test_bad_bench_numbers_are_refused_before_anything_is_sent_or_started(tmp_path, command, args, message):
    listener = socket.create_server(("127.0.0.1", 0))
    started = tmp_path / "started"
    target = (["--", sys.executable, "-c", f"open({str(started)!r}, 'w')"] if command == "run"
              else [f"http://127.0.0.1:{listener.getsockname()[1]}"])
    proc = run_cli(command, *args, *target, timeout=20)
    assert proc.returncode == 2 and proc.stderr.decode().count("\n") == 1 and message in proc.stderr.decode()
    listener.setblocking(False)
    with pytest.raises(BlockingIOError):  # no request was sent
        listener.accept()
    listener.close()
    assert not started.exists()  # no server was started


@pytest.mark.parametrize("kwargs, said", [
    ({"percentiles": [50, 150]}, "a percentile is between 0 and 100, not 150"),
    ({"percentiles": [math.nan]}, "a percentile is between 0 and 100, not nan"),
    ({"repeat": 0}, "repeat must be 1 or more, not 0"),
    ({"min_effect": -5}, "min_effect must be a finite number, 0 or more, not -5"),
    ({"vs": [["vllm", "serve", "m"]], "repeat": 2}, "vs takes one command line, a list of strings "
     "(vs=['vllm', 'serve', 'm2']), not a list holding ['vllm', 'serve', 'm']"),
    ({"vs": "vllm serve m", "repeat": 2}, "vs takes one command line, a list of strings "
     "(vs=['vllm', 'serve', 'm2']), not a string: 'vllm serve m'"),
])
def test_the_python_run_refuses_bad_arguments_before_it_starts_anything(tmp_path, kwargs, said):
    started = tmp_path / "started"
    with pytest.raises(firedup.FiredupError, match=f"^{re.escape(said)}$"):
        firedup.run([sys.executable, "-c", f"open({str(started)!r}, 'w')"], ledger=tmp_path / "l.db", stall=10,
                    **kwargs)
    assert not started.exists() and not (tmp_path / "l.db").exists()


def test_run_of_a_server_that_fails_says_why_and_benches_nothing(tmp_path):
    server = tmp_path / "server.py"
    server.write_text("import sys\nprint('Traceback (most recent call last):', flush=True)\n"
                      "print('ModuleNotFoundError: No module named \\'flash_attn\\'', flush=True)\nsys.exit(1)\n")
    proc = run_cli("run", "--name", "broken", "--json", "--num-prompts", "2", "--", sys.executable, str(server))
    verdict = json.loads(proc.stdout.splitlines()[-1])
    assert proc.returncode == 1 and verdict["outcome"] == "failed" and verdict["cause"] == "missing_module"
    assert [r["kind"] for r in json.loads(run_cli("runs", "--json").stdout)] == ["launch"]


def _failing_repeat(monkeypatch, which):
    """The ``which``-th benchmark measured (from 1) measures nothing: every request failed."""
    from firedup.bench import session
    calls = []
    real = session.run_once

    def run_once(url, workload, **kwargs):
        calls.append(url)
        if len(calls) == which:
            raise BenchFailed("all 4 requests failed, so nothing was measured; the first: HTTP 503: busy")
        return real(url, workload, **kwargs)

    monkeypatch.setattr(session, "run_once", run_once)


@pytest.mark.parametrize("vs", [False, True])
def test_a_repeat_that_measured_nothing_is_said_and_the_others_are_recorded(monkeypatch, capsys, vs):
    from firedup import cli

    _failing_repeat(monkeypatch, 2)  # with --vs, started A B B A A B: B's first
    url, serve = zero_server()
    code = cli.main(["run", "--repeat", "3", "--num-prompts", "4", "--input-len", "4", "--output-len", "4",
                     "--warmup", "0", "--json", "--url", url, "--", *serve, *(["--vs", *serve] if vs else [])])
    out = json.loads(capsys.readouterr().out)
    assert code in (0, 1)  # 1: the zero-work server can make the client the bottleneck
    failed = {"repeat": 1 if vs else 2,
              "error": "all 4 requests failed, so nothing was measured; the first: HTTP 503: busy"}
    benches = {r["id"]: r for r in json.loads(run_cli("runs", "--json").stdout) if r["kind"] == "bench"}
    if vs:
        assert out["failed_repeats"] == {"B": [failed]}
        a, b = benches[out["runs"]["A"]]["metrics"], benches[out["runs"]["B"]]["metrics"]
        assert (len(a["repeats"]), len(b["repeats"])) == (3, 2) and b["failed_repeats"] == [failed]
        assert (a["interleaved"]["rounds"], b["interleaved"]["rounds"]) == ([0, 1, 2], [1, 2])
    else:
        assert out["failed_repeats"] == [failed] and len(out["repeats"]) == 2
        assert benches[out["run_id"]]["metrics"]["failed_repeats"] == [failed]


def test_an_env_prefix_is_compared_as_the_environment_not_the_arguments(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    url, serve = zero_server()
    proc = run_cli("run", "--repeat", "2", "--num-prompts", "4", "--input-len", "4", "--output-len", "4", "--warmup",
                   "0", "--json", "--url", url, "--", "env", "OMP_NUM_THREADS=1", *serve, "--vs", *serve)
    assert proc.returncode in (0, 1), proc.stderr  # 1: the zero-work server can make the client the bottleneck
    assert json.loads(proc.stdout)["compare"]["changes"] == [
        [{"section": "env", "key": "OMP_NUM_THREADS", "a": "1", "b": None}]]


def test_interleaved_repeats_pair_by_their_round_when_one_measured_nothing():
    with Ledger() as ledger:
        ids = {"group": "g", "order": "ABBAAB"}
        a = _bench_run(ledger, throughput=[100, 200, 300], interleaved={**ids, "side": "A", "rounds": [0, 1, 2]})
        b = _bench_run(ledger, throughput=[201, 302], interleaved={**ids, "side": "B", "rounds": [1, 2]})
        rows = {r["metric"]: r["changes"][0] for r in compare([ledger.get(a), ledger.get(b)])["rows"]}
    assert rows["output_throughput"]["p"] == pvalue([200, 300], [201, 302], paired=True)


def _served(path, at_least):
    """Wait until the zero-work server's --log holds ``at_least`` requests answered."""
    deadline = time.monotonic() + 60
    while not path.exists() or len(path.read_text().splitlines()) < at_least:
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.mark.parametrize("sig, code, vs", [(signal.SIGINT, 130, False), (signal.SIGTERM, 143, False),
                                           (signal.SIGTERM, 143, True)])
def test_an_interrupted_run_records_the_repeats_it_measured_and_stops_its_server(tmp_path, sig, code, vs):
    dataset, requests = tmp_path / "prompts.jsonl", tmp_path / "requests.jsonl"
    dataset.write_text('{"prompt": "say hi", "output_len": 10}\n')
    url, serve = zero_server("20", "--log", str(requests))  # 20 ms a token: a request takes 200 ms
    proc = subprocess.Popen([sys.executable, "-m", "firedup", "run", "--name", "cut",
                             "--repeat", "2" if vs else "3",
                             "--num-prompts", "4", "--warmup", "0", "--dataset", str(dataset), "--json", "--url", url,
                             "--", *serve, *(["--vs", *serve] if vs else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"})
    _served(requests, 9 if vs else 5)  # the first repeat(s) done (A B), and one request of the next under way
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code and out == b"", err
    runs = json.loads(run_cli("runs", "--json").stdout)
    assert [r["kind"] for r in runs] == ["bench"] * (2 if vs else 1) + ["launch"] * (3 if vs else 1)
    for bench in runs[:2 if vs else 1]:
        assert len(bench["metrics"]["repeats"]) == 1 and bench["metrics"]["completed"] == 4  # the cut one dropped
        assert bench["metrics"]["cut_short"] == f"interrupted after 1 of {2 if vs else 3} repeats"
    kept = (f"run {runs[1]['id']} (A: 1 of 2 repeats), run {runs[0]['id']} (B: 1 of 2 repeats)" if vs
            else f"run {runs[0]['id']} (1 of 3 repeats)")
    assert err.decode().startswith("firedup: interrupted; stopped the server's process group (terminated), log ")
    assert err.decode().endswith(f"; recorded what was measured: {kept}\n"), err
    with pytest.raises(ConnectionRefusedError):  # the server was stopped
        socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=5).close()


@contextmanager
def _serving(serve):
    """The zero-work server ``serve`` (from zero_server) running, until the block ends."""
    server = subprocess.Popen(serve, stdout=subprocess.PIPE)
    try:
        server.stdout.readline()  # its port: listening
        yield server
    finally:
        server.kill()
        server.wait()


def _bench_started(url, dataset, repeat, prompts):
    """firedup bench --json of the dataset, started and left running."""
    return subprocess.Popen([sys.executable, "-m", "firedup", "bench", url, "--repeat", str(repeat), "--num-prompts",
                             str(prompts), "--warmup", "0", "--dataset", str(dataset), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"})


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_bench_records_the_repeats_it_measured_and_says_so(tmp_path, sig, code):
    dataset, requests = tmp_path / "prompts.jsonl", tmp_path / "requests.jsonl"
    dataset.write_text('{"prompt": "say hi", "output_len": 10}\n')
    url, serve = zero_server("20", "--log", str(requests))  # 20 ms a token: a request takes 200 ms
    with _serving(serve):
        proc = _bench_started(url, dataset, repeat=3, prompts=4)
        _served(requests, 5)  # the first repeat done, and one request of the second under way
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == code and out == b"", err
    runs = json.loads(run_cli("runs", "--json").stdout)
    assert [r["kind"] for r in runs] == ["bench"]
    assert len(runs[0]["metrics"]["repeats"]) == 1 and runs[0]["metrics"]["completed"] == 4  # the cut one dropped
    assert runs[0]["metrics"]["cut_short"] == "interrupted after 1 of 3 repeats"
    assert err.decode() == f"firedup: interrupted; recorded what was measured: run {runs[0]['id']} (1 of 3 repeats)\n"


def test_runs_and_show_tell_a_benchmarks_measurement_not_a_server_verdict():
    url, serve = zero_server()
    with _serving(serve):
        assert run_cli("bench", url, "--repeat", "2", "--num-prompts", "4", "--input-len", "4", "--output-len", "4",
                       "--warmup", "0").returncode in (0, 1)  # 1: the zero-work server makes the client the bottleneck
    with Ledger() as ledger:
        health = {"valid": False, "problems": ["the client used 95% of a core"], "client_cpu": 0.95,
                  "loop_lag_p99_ms": 1.0}
        invalid = ledger.record(kind="bench", outcome="incomplete", workload={}, metrics={"health": health})
        cut = ledger.record(kind="bench", outcome="ready", workload={},
                            metrics={"cut_short": "interrupted after 1 of 3 repeats", "failed": 7,
                                     "health": {**health, "valid": True, "problems": []}})
    runs = run_cli("runs").stdout.decode()
    assert "ready" not in runs and "incomplete" not in runs
    assert re.search(rf"^{invalid} .* ✗ invalid ", runs, re.M)
    assert re.search(rf"^{cut} .* ! measured, cut short, 7 failed", runs, re.M)
    shown = run_cli("show", "1").stdout.decode()
    assert re.match(r"run 1  [✓✗] (measured|invalid)\n", shown)
    for said in ("workload: input_len=4, output_len=4, num_prompts=4", "repeats: 2 (one server start)",
                 "Successful requests:", "Output token throughput (tok/s):", "Mean TTFT (ms):", "client: "):
        assert said in shown, shown
    assert "cut short: interrupted after 1 of 3 repeats" in run_cli("show", str(cut)).stdout.decode()


def test_a_server_that_goes_away_mid_bench_is_said_to_in_one_note(tmp_path):
    dataset, requests = tmp_path / "prompts.jsonl", tmp_path / "requests.jsonl"
    dataset.write_text('{"prompt": "say hi", "output_len": 5}\n')
    url, serve = zero_server("20", "--log", str(requests))  # 20 ms a token: a request takes 100 ms
    with _serving(serve):
        proc = _bench_started(url, dataset, repeat=2, prompts=20)
        _served(requests, 3)
    out, err = proc.communicate(timeout=60)
    measured = json.loads(out)
    assert re.fullmatch(rf"the server went away during repeat 1: \d+ of 20 requests found nothing listening "
                        rf"at {url}", measured["warnings"][0]), measured["warnings"]
    assert measured["failed_repeats"] == [{"repeat": 2, "error": f"nothing is listening at {url}"}]
    # what it measured met no server: not the workload's number, said, recorded invalid, exit 1
    assert proc.returncode == 1 and measured["health"]["valid"] is False
    assert any(p.startswith("the server went away: ") for p in measured["health"]["problems"])
    assert json.loads(run_cli("runs", "--json").stdout)[0]["outcome"] == "incomplete"


def test_a_launched_server_killed_mid_bench_makes_the_run_invalid_and_says_so(tmp_path):
    """firedup run holds the server it started: killed while measured (kill -9, as the OOM killer does),
    it is named, the repeat is no measurement, and run exits 1."""
    requests, pid = tmp_path / "requests.jsonl", tmp_path / "pid"
    url, serve = zero_server("20", "--log", str(requests))
    server = tmp_path / "server.py"
    server.write_text(f"import os, sys\nopen({str(pid)!r}, 'w').write(str(os.getpid()))\n"
                      f"os.execv(sys.executable, {serve!r})\n")
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text('{"prompt": "say hi", "output_len": 5}\n')
    proc = subprocess.Popen([sys.executable, "-m", "firedup", "run", "--name", "killed", "--num-prompts", "40",
                             "--warmup", "0", "--dataset", str(dataset), "--json", "--url", url, "--",
                             sys.executable, str(server)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"})
    _served(requests, 3)
    os.kill(int(pid.read_text()), signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    measured = json.loads(out.splitlines()[-1])
    assert proc.returncode == 1, err
    said = [p for p in measured["health"]["problems"] if "process ended during the benchmark" in p]
    assert said and "killed by SIGKILL" in said[0] and "OOM killer" in said[0]
    assert json.loads(run_cli("runs", "--json").stdout)[0]["outcome"] == "incomplete"


def test_the_client_timing_problems_include_the_worst_starvation_and_a_single_stall():
    steady = [0.001] * 300
    assert timing_problems(steady, 0.3, 1.1, 500, 3.0) == []
    # read so late that most gaps between tokens read 0: the median is 0, the check must not switch off
    assert "tokens were timed together" in timing_problems(steady, 21.6, 0.0, 500, 3.0)[0]
    assert timing_problems(steady, 0.3, 0.0, 500, 3.0) == []  # a server that sends tokens together
    assert timing_problems(steady, 5.0, 0.0, 0, 3.0) == []  # one chunk a response: no gaps to time
    # one freeze of 1 s in a 3 s run: p99 of the loop's lag hides it, the throughput does not
    frozen = timing_problems(steady + [1.0], 0.3, 1.1, 500, 3.0)
    assert frozen == ["the client's event loop stalled once for 1000 ms, 33% of the run"]
    assert timing_problems(steady + [0.04], 0.3, 1.1, 500, 3.0) == []


def test_compare_says_when_a_run_is_not_the_servers_number():
    with Ledger() as ledger:
        a = _bench_run(ledger, throughput=[100, 101, 99])
        b = _bench_run(ledger, throughput=[52, 51, 50])
        run_b = ledger.get(b)
        run_b["metrics"]["health"] = {"valid": False, "problems": ["repeat 2: the client's event loop lagged 91 ms"]}
        report = compare([ledger.get(a), run_b])
    assert any(n.startswith(f"run {b} is not the server's number (repeat 2: the client's event loop lagged 91 ms)")
               for n in report["notes"]), report["notes"]


def test_a_run_is_the_servers_number_only_if_every_repeat_is():
    from firedup.bench import session
    good = {"valid": True, "problems": [], "client_cpu": 0.1}
    bad = {"valid": False, "problems": ["the client read the sockets 27.8 ms late (p99)"], "client_cpu": 0.2}
    results = [type("R", (), {"health": h, "valid": h["valid"]})() for h in (bad, good, good)]
    assert session.health(results) == {"valid": False, "invalid_repeats": [1],
                                       "problems": ["repeat 1: the client read the sockets 27.8 ms late (p99)"]}
    assert session.health(results[1:])["valid"] and session.health(results[:1]) is bad


def test_a_start_that_fails_after_measured_repeats_records_them_and_says_so(tmp_path):
    url, serve = zero_server()
    server = tmp_path / "server.py"  # serves once; started again, fails
    server.write_text("import os, sys\n"
                      f"if os.path.exists({str(tmp_path / 'started')!r}):\n"
                      "    print('Traceback (most recent call last):', flush=True)\n"
                      "    print('ModuleNotFoundError: No module named \\'flash_attn\\'', flush=True)\n"
                      "    sys.exit(1)\n"
                      f"open({str(tmp_path / 'started')!r}, 'w').close()\n"
                      f"os.execv(sys.executable, {serve!r})\n")
    proc = run_cli("run", "--name", "once", "--repeat", "2", "--relaunch", "--num-prompts", "4", "--input-len", "4",
                   "--output-len", "4", "--warmup", "0", "--json", "--url", url, "--", sys.executable, str(server))
    assert proc.returncode == 1 and json.loads(proc.stdout.splitlines()[-1])["cause"] == "missing_module"
    runs = json.loads(run_cli("runs", "--json").stdout)
    assert [(r["kind"], r["outcome"]) for r in runs[1:]] == [("launch", "failed"), ("launch", "ready")]
    assert runs[0]["kind"] == "bench" and len(runs[0]["metrics"]["repeats"]) == 1
    assert runs[0]["metrics"]["cut_short"] == "a server start not ready (failed) after 1 of 2 repeats"
    assert proc.stderr.decode() == f"firedup: recorded what was measured: run {runs[0]['id']} (1 of 2 repeats)\n"


def _tokenizer_file(tmp_path):
    """A small byte-level BPE tokenizer, trained here (as the tiny model's is)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(0, len(WORDS), 7)] * 5
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path


def test_a_launched_models_own_tokenizer_sizes_the_prompts_when_none_is_given(tmp_path):
    """A server launched from a model folder here: its tokenizer.json, not lengths calibrated on its usage."""
    from firedup.bench.session import Measure, Server, measure, models_tokenizer
    model = tmp_path / "model"
    model.mkdir()
    assert models_tokenizer(Workload(), str(model)) == Workload()  # no tokenizer.json in it
    _tokenizer_file(model)
    assert models_tokenizer(Workload(), str(model)).tokenizer == str(model)
    assert models_tokenizer(Workload(tokenizer="other"), str(model)).tokenizer == "other"
    url, serve = zero_server()
    with _serving(serve):
        server = Server(url, {"command": ["vllm", "serve", str(model)], "config": {}})
        result, = measure(server, Workload(num_prompts=8, input_len=12, output_len=4, warmup=0), Measure(), 1)
    assert result.metrics["input_tokens_by"].startswith(f"tokenizer {model} ")


def test_prompts_from_a_tokenizer_encode_to_the_length_asked(tmp_path):
    path = _tokenizer_file(tmp_path)
    tokenizer = Tokenizer(str(tmp_path))  # a folder holding tokenizer.json, as vllm's --tokenizer
    assert 0 not in tokenizer.allowed  # the special token is never drawn
    built = from_tokenizer(tokenizer, lengths(40, 64, 16, 0.0, seed=1), seed=1)
    assert [len(tokenizer.encode(p.text)) for p in built] == [p.tokens for p in built]  # counted, not assumed
    # decoded ids can re-encode otherwise (" calls" "here" -> " call" "sh" "ere"): the retries bring most back
    assert sum(p.tokens == 64 for p in built) >= 20 and sum(p.tokens for p in built) == pytest.approx(40 * 64, rel=0.02)
    assert all(p.output_len == 16 and p.input_len == 64 for p in built)
    again = from_tokenizer(Tokenizer(str(path)), lengths(40, 64, 16, 0.0, seed=1), seed=1)  # the file itself
    assert [p.text for p in again] == [p.text for p in built]  # seeded


class _WordCounter(ServerTokenizer):
    """A tokenize endpoint whose words are one to four tokens (as a small BPE
    vocabulary cuts them), plus a BOS."""

    def __init__(self):
        super().__init__(endpoint=None, model="m")

    async def count(self, text):
        return 1 + sum(1 + len(word) // 3 for word in text.split())


def test_prompts_fitted_with_a_tokenize_endpoint_hit_every_length_asked():
    """Words of two or three tokens stepped over the length asked and back (101
    tokens sent for 96 asked); the one-token filler pads to it exactly."""
    counter = _WordCounter()
    counter.filler = asyncio.run(counter._one_token_word())
    assert counter.filler == "a"  # "the" is two tokens here
    sizes = [(n, 4) for n in (2, 3, 5, 16, 17, 64, 333)] * 30
    built = asyncio.run(fitted(counter, sizes, seed=7))
    assert [p.tokens for p in built] == [n for n, _ in sizes]
    assert [asyncio.run(counter.count(p.text)) for p in built] == [n for n, _ in sizes]
    assert len({p.text for p in built if p.input_len == 64}) == 30  # still random prompts


def test_random_range_ratio_draws_lengths_as_vllm():
    drawn = lengths(2000, 100, 20, 0.5, seed=3)
    ins, outs = [i for i, _ in drawn], [o for _, o in drawn]
    assert min(ins) == 50 and max(ins) == 150 and statistics.fmean(ins) == pytest.approx(100, rel=0.03)
    assert min(outs) == 10 and max(outs) == 30
    assert set(lengths(5, 64, 32, 0.0, 0)) == {(64, 32)}
    with pytest.raises(WorkloadError, match=r"\[0, 1\)"):
        lengths(5, 64, 32, 1.0, 0)


def test_calibrated_input_lengths_are_said(tmp_path):
    """The zero-work server has no tokenize endpoint: words, calibrated on its usage."""
    result = calibrate(Workload(concurrency=2, num_prompts=20, input_len=30, output_len=4, warmup=0))
    assert result.metrics["input_tokens_by"].startswith("calibrated: 1.000 tokens a word")
    assert result.metrics["input_tokens_asked"] == result.metrics["total_input_tokens"] == 600
    assert result.workload["prompts"] == "usage" and not result.warnings


def test_bench_input_errors_are_one_line(tmp_path):
    # (--random-range-ratio out of [0, 1) is refused when parsed: test_input.py)
    proc = run_cli("bench", "--calibrate", "--num-prompts", "2", "--tokenizer", str(tmp_path / "missing"))
    assert proc.returncode == 2 and proc.stderr.decode().startswith("firedup: ")
    assert len(proc.stderr.decode().splitlines()) == 1


def test_compare_refuses_a_run_named_twice_and_says_unset_for_what_a_run_did_not_record():
    """compare 29 29 is no comparison; --force beside a bench of a bare URL (no command, no server
    recorded) says "unset", never Python's None or an empty side; one repeat each tests no metric, and
    the line under the table says so instead of "of the 0 metrics tested"."""
    with Ledger() as ledger:
        a = _bench_run(ledger, throughput=[90.0])
        b = _bench_run(ledger, throughput=[80.0], server="llamacpp", command=["python", "-m", "llama_cpp.server"],
                       config={"n_ctx": 1024}, environment={"python": "3.11"}, workload={"input_len": 512})
    for args in ([str(a), str(a)], [str(b), str(a), str(b)]):
        proc = run_cli("compare", "--force", *args)
        twice = args[0]
        assert proc.returncode == 2 and proc.stdout == b"", proc.stdout
        said = f"firedup: run {twice} is named twice: compare sets different runs side by side\n"
        assert proc.stderr.decode() == said
    text = run_cli("compare", "--force", str(a), str(b)).stdout.decode()
    assert "None" not in text and "  →" not in text, text
    assert (f"changed from run {a} to run {b}: args unset → python -m llama_cpp.server; server unset → llamacpp; "
            "n_ctx unset → 1024; input_len 256 → 512; snapshot missing → taken") in text, text  # --force: workloads too
    assert "0 metrics tested" not in text
    assert (f"run {b}: no metric could be tested (one repeat on a side has no noise to test against: --repeat K), "
            "so no change is called") in text, text


def test_an_interruption_inside_a_request_task_is_raised_once_and_not_logged_again(caplog):
    def interrupted(result):  # Ctrl-C while a request's task runs (the progress bar's tick)
        raise KeyboardInterrupt

    raised = False
    try:  # not pytest.raises: its record of the exception would keep the task that held it alive
        calibrate(Workload(request_rate=20, num_prompts=8, input_len=4, output_len=4, warmup=0), on_result=interrupted)
    except KeyboardInterrupt:
        raised = True
    gc.collect()  # the task that held it, collected: asyncio would log what it held then (on stderr, for firedup)
    assert raised and [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
