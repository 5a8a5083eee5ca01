"""Run a benchmark: discover the model, warm up, send the workload at the
asked concurrency or rate, watch the client's own health, diff the server's
Prometheus counters (speculative decoding), and compute the metrics."""

from __future__ import annotations

import asyncio
import math
import random
import re
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._exceptions import BenchFailed
from . import client, metrics, prompts
from .prompts import Prompt
from .workload import Workload

# A run whose client could not keep up is not the server's number.
MAX_LOOP_LAG_MS = 50.0
# One stall of the client's loop (a paused process, a swapped-out page) longer than this share of
# the run, and longer than MAX_LOOP_LAG_MS: its p99 hides it, the throughput does not.
MAX_STALL_SHARE = 0.05
# With most gaps between tokens read as 0, a read lag past this says the tokens were read together.
MIN_READ_LAG_MS = 1.0
MAX_CLIENT_CPU = 0.9  # of one core
MIN_RATE_ACHIEVED = 0.95
MAX_INPUT_OFF = 0.02  # input tokens counted by the server vs asked
LAG_PROBE = 0.01


@dataclass
class BenchResult:
    url: str
    model: str
    model_source: str
    workload: dict[str, Any]
    metrics: dict[str, Any]
    health: dict[str, Any]
    requests: list[dict[str, Any]] = field(default_factory=list)
    speculative: dict[str, float] | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.health["valid"]

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "model": self.model, "model_source": self.model_source, "workload": self.workload,
                **self.metrics, **metrics.vllm_arrays(self.requests), "health": self.health,
                "speculative": self.speculative,
                "warnings": self.warnings, "requests": self.requests}


async def _model(endpoint: client.Endpoint) -> str:
    """The last resort for the model's name: a server can serve completions
    while its /v1/models fails (transformers serve without a Hugging Face cache folder)."""
    conn = await endpoint.connect()
    try:
        models = await conn.get_json("/v1/models")
        return models["data"][0]["id"]
    except (KeyError, IndexError, TypeError):
        raise client.HttpError("GET /v1/models named no model: pass --model NAME") from None
    except client.HttpError as e:
        raise client.HttpError(f"{e}: pass --model NAME") from None
    finally:
        conn.close()


# Flags naming the model a server serves, by family, the served name first.
SERVED_NAME_FLAGS = ("--served-model-name", "--alias")  # vLLM and SGLang; llama.cpp
MODEL_FLAGS = ("--model", "--model-path", "--model-id", "-m")  # vLLM, llama-cpp-python; SGLang; TGI; llama.cpp


def served_model(command: list[str], config: dict[str, Any]) -> tuple[str, str] | None:
    """The model's name from a launch's command line, else from the
    configuration the server printed: (name, where it came from)."""
    def value(flags: tuple[str, ...]) -> str | None:
        for i, arg in enumerate(command):
            flag, eq, rest = arg.partition("=")
            if flag in flags and not (flag == "-m" and i and re.search(r"python[\d.]*$", command[i - 1])):
                return rest if eq else (command[i + 1] if i + 1 < len(command) else None)
        return None

    name = value(SERVED_NAME_FLAGS) or value(MODEL_FLAGS)
    if name is None and "serve" in command[:-1]:  # vllm serve M, transformers serve M
        following = command[command.index("serve") + 1]
        name = following if not following.startswith("-") else None
    if name:
        return name, "the launch's command line"
    if config.get("model"):
        return str(config["model"]), "the configuration the server printed"
    return None


async def _prompts(workload: Workload, endpoint: client.Endpoint, pool: _Pool,
                   model: str) -> tuple[list[Prompt], str, str]:
    """The run's prompts, and how their input lengths were made the server's
    tokens: in a word (for the workload) and in a sentence (for the report)."""
    if workload.dataset:
        return workload.dataset_prompts(), "dataset", "the dataset (lengths as written)"
    sizes = workload.sizes()
    if workload.local_tokenizer:
        return (prompts.from_tokenizer(workload.local_tokenizer, sizes, workload.seed), "tokenizer",
                f"tokenizer {workload.tokenizer} (random token ids, as vllm bench serve's random dataset)")
    counter = prompts.ServerTokenizer(endpoint, model)
    try:
        path = await counter.find()
        if path:
            return (await prompts.fitted(counter, sizes, workload.seed), "endpoint",
                    f"the server's POST {path} (random words fitted to the length)")
    finally:
        counter.close()
    # Requests of one output token, not counted: how many tokens the server makes of a word.
    counted = []
    for probe in prompts.scaled(sizes[:prompts.CALIBRATION_REQUESTS], workload.seed + 1, 1.0):
        r = await _one(pool, workload, model, Prompt(probe.text, 1), time.perf_counter())
        if r.ok and r.prompt_tokens:
            counted.append((r.prompt_tokens, len(probe.text.split())))
    if not counted:
        return (prompts.scaled(sizes, workload.seed, 1.0), "words",
                "words: the server has no tokenize endpoint and sent no usage to calibrate on (pass --tokenizer)")
    ratio = sum(t for t, _ in counted) / sum(w for _, w in counted)
    return (prompts.scaled(sizes, workload.seed, ratio), "usage",
            f"calibrated: {ratio:.3f} tokens a word in the server's usage of {len(counted)} requests sent first "
            "(no --tokenizer, no tokenize endpoint)")


async def _prometheus(endpoint: client.Endpoint) -> dict[str, dict[str, float]]:
    """The samples of /metrics (empty when the server has none)."""
    try:
        conn = await endpoint.connect()
        try:
            response = await conn.request("GET", "/metrics")
        finally:
            conn.close()
    except (OSError, client.HttpError):
        return {}
    if response.status != 200:
        return {}
    return parse_prometheus(response.body.decode(errors="replace"))


_SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*)(\{.*\})?\s+(\S+)(?:\s+-?\d+)?$")


def parse_prometheus(text: str) -> dict[str, dict[str, float]]:
    """Prometheus text format: metric name -> {label set as written: value}."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if m is None:
            continue
        try:
            out.setdefault(m[1], {})[m[2] or ""] = float(m[3])
        except ValueError:
            continue
    return out


def speculative(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> dict[str, Any] | None:
    """Acceptance of speculative decoding with ``vllm bench serve``'s
    definitions (rate in %, length counting the bonus token): over the run
    from vLLM's counters, or SGLang's gauges (averages over its last logging
    interval) after it."""
    def delta(name: str) -> float:
        return sum(after.get(name, {}).values()) - sum(before.get(name, {}).values())

    drafted = delta("vllm:spec_decode_num_draft_tokens_total")
    if drafted:
        drafts = delta("vllm:spec_decode_num_drafts_total")
        accepted = delta("vllm:spec_decode_num_accepted_tokens_total")
        per_position: dict[int, float] = {}
        name = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
        for labels, value in after.get(name, {}).items():
            pos = re.search(r'position="(\d+)"', labels)
            if pos and drafts:
                gained = value - before.get(name, {}).get(labels, 0.0)
                per_position[int(pos[1])] = per_position.get(int(pos[1]), 0.0) + gained / drafts
        return {"acceptance_rate": 100 * accepted / drafted,
                "acceptance_length": 1 + accepted / drafts if drafts else 0.0,
                "num_drafts": drafts, "draft_tokens": drafted, "accepted_tokens": accepted,
                "per_position_acceptance_rates": [per_position[p] for p in sorted(per_position)],
                "source": "vllm:spec_decode_* counters over the run"}
    rate = list(after.get("sglang:spec_accept_rate", {}).values())
    length = list(after.get("sglang:spec_accept_length", {}).values())
    if any(length):  # a server that does not speculate reports 0
        return {"acceptance_rate": 100 * sum(rate) / len(rate) if rate else None,
                "acceptance_length": sum(length) / len(length),
                "source": "sglang:spec_accept_* gauges after the run (its last logging interval)"}
    return None


class _Pool:
    def __init__(self, endpoint: client.Endpoint):
        self.endpoint = endpoint
        self.idle: list[client.Connection] = []

    async def get(self) -> client.Connection:
        while self.idle:
            conn = self.idle.pop()
            if not conn.closed:
                return conn
            conn.close()  # the server hung up on an idle keep-alive connection
        return await self.endpoint.connect()

    def put(self, conn: client.Connection) -> None:
        if conn.reusable:
            self.idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        for conn in self.idle:
            conn.close()


async def _one(pool: _Pool, workload: Workload, model: str, p: Prompt, t0: float) -> metrics.RequestResult:
    path, payload = workload.payload(model, p.text, p.output_len)
    try:
        conn = await pool.get()
    except OSError as e:
        result = metrics.RequestResult(ok=False, start=time.perf_counter() - t0, error=f"connect: {e}")
    else:
        result = await client.stream(conn, path, payload, workload.chat, t0)
        pool.put(conn)
    result.asked_input, result.asked_output = p.input_len, p.output_len
    if result.ok and not result.usage and p.input_len:
        result.prompt_tokens = p.input_len  # the server counted none (no usage sent): the length asked, as vLLM's
    return result


async def run_async(url: str, workload: Workload, model: str | None = None,
                    on_result: Callable[[metrics.RequestResult], None] | None = None,
                    percentiles: Sequence[float] = (99,), goodput: dict[str, float] | None = None,
                    api_key: str | None = None, model_source: str = "--model") -> BenchResult:
    """``model``: the served model's name (default: the first of /v1/models),
    ``model_source``: where that name came from, for the report."""
    endpoint = client.Endpoint(url, api_key)
    if not model:
        model, model_source = await _model(endpoint), "GET /v1/models"
    pool = _Pool(endpoint)
    items, prompt_kind, prompt_source = await _prompts(workload, endpoint, pool, model)
    for p in items[:workload.warmup]:
        await _one(pool, workload, model, p, time.perf_counter())
    before = await _prometheus(endpoint)

    results: list[metrics.RequestResult] = []
    lags: list[float] = []
    stop = asyncio.Event()

    async def lag_probe() -> None:
        while not stop.is_set():
            start = time.perf_counter()
            await asyncio.sleep(LAG_PROBE)
            lags.append(max(0.0, time.perf_counter() - start - LAG_PROBE))

    def done(result: metrics.RequestResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    del endpoint.read_lag[:]  # the warm-up's reads are not the run's
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    deadline = t0 + workload.duration if workload.duration else None
    probe = asyncio.create_task(lag_probe())
    sent = 0

    def more() -> bool:
        return ((workload.num_prompts is None or sent < len(items))
                and (deadline is None or time.perf_counter() < deadline))

    # an infinite rate (vllm bench serve's default) sends every request at once: no arrivals to draw
    paced = workload.request_rate is not None and math.isfinite(workload.request_rate)
    if workload.request_rate:
        rng = random.Random(workload.seed)
        gate = asyncio.Semaphore(workload.concurrency) if workload.concurrency else None
        tasks = []

        async def limited(p: Prompt) -> None:
            if gate is None:
                done(await _one(pool, workload, model, p, t0))
                return
            async with gate:
                done(await _one(pool, workload, model, p, t0))

        next_at = t0
        while more():
            tasks.append(asyncio.create_task(limited(items[sent % len(items)])))
            sent += 1
            if paced:
                next_at += rng.gammavariate(workload.burstiness, 1.0 / (workload.request_rate * workload.burstiness))
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
        send_span = time.perf_counter() - t0
        scheduled_span = next_at - t0
        await asyncio.gather(*tasks)
    else:
        async def worker() -> None:
            nonlocal sent
            while more():
                p = items[sent % len(items)]
                sent += 1
                done(await _one(pool, workload, model, p, t0))

        await asyncio.gather(*(worker() for _ in range(workload.concurrency or 1)))
        send_span = time.perf_counter() - t0
    duration = time.perf_counter() - t0
    stop.set()
    await probe
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    pool.close()
    failed = [r.error for r in results if not r.ok]
    first_error = " ".join(failed[0].split()) if failed else ""  # one line: an error body can be indented JSON
    if failed and len(failed) == len(results):  # latencies of 0 are no measurement
        raise BenchFailed(f"all {len(failed)} requests failed, so nothing was measured; the first: {first_error}")
    after = await _prometheus(endpoint)

    cpu = (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) / duration if duration else 0.0
    lag_p99 = 1000 * metrics.percentile(lags, 99)
    read_lag_p99 = 1000 * metrics.percentile(list(endpoint.read_lag), 99)
    health: dict[str, Any] = {"client_cpu": cpu, "loop_lag_p99_ms": lag_p99, "read_lag_p99_ms": read_lag_p99,
                              "sent": sent}
    computed = metrics.compute(results, duration, percentiles=list(percentiles), goodput=goodput)
    described = {**workload.describe(), "prompts": prompt_kind}
    computed.update(max_concurrency=workload.concurrency, request_rate=described["request_rate"],
                    burstiness=workload.burstiness, input_tokens_by=prompt_source)
    problems = []
    if paced:
        achieved = sent / send_span if send_span else 0.0
        # Against the arrivals drawn, not the mean rate: a short run's draw is itself off by several %.
        drawn = sent / scheduled_span if scheduled_span else 0.0
        health.update(target_rate=workload.request_rate, drawn_rate=drawn, achieved_rate=achieved)
        if achieved < MIN_RATE_ACHIEVED * drawn:
            problems.append(f"sent {achieved:.1f} req/s of the {drawn:.1f} drawn ({workload.request_rate:g} asked)")
    problems += timing_problems(lags, read_lag_p99, computed["median_itl_ms"],
                                sum(len(r.itl) for r in results if r.ok), duration)
    health["loop_stall_ms"] = 1000 * max(lags, default=0.0)
    if cpu > MAX_CLIENT_CPU:
        problems.append(f"the client used {100 * cpu:.0f}% of a core")
    health["valid"] = not problems
    health["problems"] = problems

    warnings = []
    if failed:
        warnings.append(f"{len(failed)} of {len(results)} requests failed; the first: {first_error}")
    no_usage = sum(1 for r in results if r.ok and not r.usage)
    if no_usage:
        warnings.append(f"{no_usage} response(s) came without the server's usage: their output tokens are the "
                        "streamed chunks counted (one token each, not guaranteed) and their prompt tokens the "
                        "lengths asked for (unknown for a dataset's prompts)")
    off = metrics.count_disagreement(results)
    if off > 0.01:
        warnings.append(f"streamed chunks and the server's usage disagree by {100 * off:.1f}% on output tokens "
                        "(several tokens per chunk?): token counts are the server's")
    if not workload.dataset:  # random prompts ask for their output lengths
        short = sum(1 for r in results if r.ok and r.output_tokens < r.asked_output)
        if short:
            warnings.append(f"{short} request(s) stopped before the tokens asked (end of sequence): "
                            "output throughput counts the tokens generated (--ignore-eos asks for all)")
        warnings += _input_lengths(results, computed, workload.chat)
    spec = speculative(before, after)
    if spec:  # flat too, under vllm bench serve's keys, so that compare shows acceptance beside throughput
        computed.update({f"spec_decode_{k}": v for k, v in spec.items() if k != "source"})
    return BenchResult(url=endpoint.base, model=model, model_source=model_source,
                       workload=described, metrics=computed,
                       health=health, requests=[r.to_dict() for r in results], speculative=spec, warnings=warnings)


def timing_problems(lags: list[float], read_lag_p99: float, median_itl_ms: float, gaps: int,
                    duration: float) -> list[str]:
    """Why the client's clock is not the server's: its event loop lagged (at p99,
    or once for a share of the run: a paused process, a swapped-out page, which
    p99 hides and the throughput does not), or it read the sockets later than
    tokens came apart. Bytes are timed when they reached the socket, but tokens
    of one stream that wait there together are read, and timed, together: so
    late that most gaps read 0 (a median between tokens that no server streams)
    is the worst case."""
    problems = []
    lag_p99, stall_ms = 1000 * metrics.percentile(lags, 99), 1000 * max(lags, default=0.0)
    if lag_p99 > MAX_LOOP_LAG_MS:
        problems.append(f"the client's event loop lagged {lag_p99:.0f} ms (p99)")
    elif duration and stall_ms > max(MAX_LOOP_LAG_MS, 1000 * MAX_STALL_SHARE * duration):
        problems.append(f"the client's event loop stalled once for {stall_ms:.0f} ms, "
                        f"{stall_ms / 10 / duration:.0f}% of the run")
    if gaps and read_lag_p99 > median_itl_ms and (median_itl_ms > 0 or read_lag_p99 > MIN_READ_LAG_MS):
        problems.append(f"the client read the sockets {read_lag_p99:.1f} ms late (p99), later than the "
                        f"{median_itl_ms:.1f} ms between tokens: tokens were timed together")
    return problems


def _input_lengths(results: list[metrics.RequestResult], computed: dict[str, Any], chat: bool) -> list[str]:
    """Input tokens asked beside those the server counted: more than
    MAX_INPUT_OFF apart is said, as the output-length check says its own."""
    counted = [r for r in results if r.ok and r.usage and r.asked_input]
    asked, sent = sum(r.asked_input or 0 for r in counted), sum(r.prompt_tokens for r in counted)
    computed["input_tokens_asked"] = sum(r.asked_input or 0 for r in results if r.ok)
    if not asked or abs(sent - asked) <= MAX_INPUT_OFF * asked:
        return []
    why = ("the chat template's tokens count too" if chat else
           "lengths are right only on average without --tokenizer or a tokenize endpoint"
           if computed["input_tokens_by"].startswith("calibrated") else
           "the server adds tokens of its own (a BOS?), or its tokenizer is not the one used here")
    return [f"the server counted {sent} input tokens where {asked} were asked ({100 * (sent - asked) / asked:+.1f}%, "
            f"{sent / len(counted):.1f} a prompt): {why}"]


def run(url: str, workload: Workload, **kwargs: Any) -> BenchResult:
    with asyncio.Runner() as runner:
        runner.get_loop().set_exception_handler(_interruption_raised_once)
        return runner.run(run_async(url, workload, **kwargs))


def _interruption_raised_once(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """A Ctrl-C or SIGTERM that lands inside one of the run's tasks reaches run's
    caller, who says so; the task left holding it would say it again when
    collected ("Task exception was never retrieved", traceback and all)."""
    if not isinstance(context.get("exception"), (KeyboardInterrupt, SystemExit)):
        loop.default_exception_handler(context)


def calibrate(workload: Workload, **kwargs: Any) -> BenchResult:
    """The client's own ceiling: the same workload against a zero-work server
    in another process (so that the two do not share a core's worth of Python)."""
    server = subprocess.Popen([sys.executable, "-m", "firedup.bench.zero"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        return run(f"http://127.0.0.1:{port}", workload, **kwargs)
    finally:
        server.kill()
        server.wait()
