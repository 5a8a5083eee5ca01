"""The judge with a fake clock: every trap of the corpus and every deadline.

Lines go through the real engine (rules, tracebacks) into the judge; time is
whatever the test says it is."""

import pytest

from firedup.engine import Engine
from firedup.judge import Judge
from firedup.signals import Signal


class Run:
    """A server's log arriving over (fake) time."""

    def __init__(self, server=None, **judge):
        self.engine = Engine(server=server)
        self.judge = Judge(server=server, **judge)

    def log(self, text: str, at: float = 0.0):
        for s in self.engine.feed(text.encode()):
            self.judge.feed(s, at)
        return self.judge.decide(at)

    def exit(self, code: int, at: float):
        for s in self.engine.close():
            self.judge.feed(s, at)
        self.judge.feed(Signal("exit", data={"code": code}), at)
        return self.judge.decide(at)

    def idle(self, at: float):
        """The log went quiet: the engine reads what waits for a next line."""
        for s in self.engine.idle():
            self.judge.feed(s, at)
        return self.judge.decide(at)

    def finish(self):
        for s in self.engine.close():
            self.judge.feed(s)
        return self.judge.finish()


VLLM_READY = "(APIServer pid=1) INFO:     Application startup complete.\n"
VLLM_START = "INFO 10-12 00:26:50 api_server.py:528] vLLM API server version 0.6.3\n"


# -- traps -----------------------------------------------------------------

@pytest.mark.parametrize("up,bind_failed", [
    (VLLM_START + "INFO:     Application startup complete.\n",
     "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use\n"),
    # TGI's router says "Connected" before it binds (v3.1+)
    ('2025-12-19T10:00:00.000000Z  INFO text_generation_launcher: Args { model_id: "m", port: 80 }\n'
     "2025-12-19T10:00:25.500000Z  INFO text_generation_router::server: router/src/server.rs:2302: Connected\n",
     "2025-12-19T10:00:25.500300Z ERROR text_generation_router::server: router/src/server.rs:2325: "
     "Failed to bind to 0.0.0.0:80: Address already in use (os error 98)\n"),
])
def test_ready_looking_line_then_bind_failure_is_failed(up, bind_failed):
    run = Run()
    run.log(up, at=1)
    v = run.log(bind_failed, at=2)
    # said before the bind: the start failed there, the server never served
    assert v.outcome == "failed" and v.cause == "port_in_use" and v.phase == "http"
    assert not any("crash while serving" in note for note in v.notes)


def test_a_port_taken_long_after_a_ready_line_said_before_binding_is_a_crash_while_serving():
    """A store a weight-sync group makes after the server served: not uvicorn's bind."""
    run = Run()
    run.log(VLLM_START + "INFO:     Application startup complete.\n"
            + 'INFO:     10.0.0.5:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n' * 6
            + "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
              "address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use\n")
    v = run.finish()
    assert (v.outcome, v.cause, v.phase) == ("failed", "port_in_use", "serving")


def test_a_log_ending_as_its_http_server_starts_is_ready_unless_the_process_exited():
    # a logging config that sends uvicorn's lines to another file: the engine is
    # up, the API server starts and lists its routes, and the log ends there
    up = ("(APIServer pid=1) INFO 11-17 14:44:11 [api_server.py:1912] Starting vLLM API server 0 on http://0.0.0.0:8000\n"
          "(APIServer pid=1) INFO 11-17 14:44:11 [launcher.py:34] Available routes are:\n"
          "(APIServer pid=1) INFO 11-17 14:44:11 [launcher.py:42] Route: /metrics, Methods: GET\n")
    run = Run()
    run.log(VLLM_START + up)
    v = run.finish()
    assert v.outcome == "ready" and "Starting vLLM API server" in v.evidence["line"]
    assert v.notes and "no ready line of its own" in v.notes[0]
    run = Run(stall=60)  # watched live, no probe: silent after it, it reads the same
    run.log(VLLM_START + up, at=1)
    assert run.judge.decide(30) is None and run.judge.decide(62).outcome == "ready"
    run = Run(stall=60, confirm=5)  # a probe that never got an answer: not up after all
    run.log(VLLM_START + up, at=1)
    assert run.judge.decide(62).outcome == "stalled"
    run = Run()
    run.log(VLLM_START + up, at=1)
    assert run.exit(0, at=2).outcome != "ready"
    run = Run()
    run.log(VLLM_START + up + "INFO 11-17 14:44:12 [config.py:1] Loading weights took 3 s\n")
    assert run.finish().outcome == "incomplete"  # start-up lines after it: it was not the end of the start
    run = Run()  # before 0.7.3 no "Starting vLLM API server": the route list says it
    run.log(VLLM_START + "INFO 10-12 00:26:58 launcher.py:19] Available routes are:\n"
            "INFO 10-12 00:26:58 launcher.py:27] Route: /openapi.json, Methods: GET, HEAD\n")
    v = run.finish()
    assert v.outcome == "ready" and "Available routes are:" in v.evidence["line"]
    run = Run()  # a window that begins inside the route list
    run.log(VLLM_START + "INFO 10-12 00:26:58 launcher.py:27] Route: /tokenize, Methods: POST\n"
            "INFO 10-12 00:26:58 launcher.py:27] Route: /detokenize, Methods: POST\n")
    v = run.finish()
    assert v.outcome == "ready" and v.evidence["line"].endswith("Route: /tokenize, Methods: POST")


def test_an_offline_engine_whose_log_ends_as_it_finished_starting_is_ready_only_once_finished():
    # vllm.LLM in a notebook: its saved output stops as the engine is up, before any prompt
    engine = ("INFO 06-06 13:03:08 [core.py:65] Initializing a V1 LLM engine (v0.9.0.1) with config: "
              "model='../llama-3-8b', speculative_config=None, tokenizer='../llama-3-8b'\n"
              "INFO 06-06 13:03:20 [default_loader.py:262] Loading weights took 5.12 seconds\n"
              "INFO 06-06 13:03:35 [kv_cache_utils.py:640] Maximum concurrency for 8,192 tokens per request: 4.49x\n")
    up = "INFO 06-06 13:03:54 [core.py:167] init engine (profile, create kv cache, warmup model) took 43.59 seconds\n"
    run = Run()
    run.log(engine + up)
    v = run.finish()
    assert v.outcome == "ready" and "init engine" in v.evidence["line"]
    assert v.notes and "an offline engine" in v.notes[0]
    run = Run(stall=60)  # watched live: silence there is a start that hangs
    run.log(engine + up, at=1)
    v = run.judge.decide(62)
    assert v.outcome == "stalled" and "after its engine said it had finished starting" in v.explanation
    run = Run()  # a V1 API server of 0.8 (no process names) cut after its engine: its front end set itself up
    run.log(engine + up + "INFO 06-06 13:03:55 [serving_chat.py:118] Using default chat sampling params from "
            "model: {'temperature': 0.6}\n")
    assert run.finish().outcome == "incomplete"
    prompts = "Processed prompts:   3%|▎         | 16/500 [00:04<02:10,  3.71it/s, est. speed input: 900.12 toks/s]\n"
    run = Run()  # part way through its prompts: it served
    run.log(engine + up + prompts)
    assert run.finish().outcome == "ready"
    run = Run()  # a batch begun, no prompt done: its first step may be what hangs (or crashes: a start that failed)
    run.log(engine + up + "Processed prompts:   0%|          | 0/500 [00:00<?, ?it/s]\n")
    assert run.finish().outcome == "incomplete"
    run = Run()  # an API server's engine: its HTTP server was still to come
    run.log(VLLM_START + engine + up)
    assert run.finish().outcome == "incomplete"
    run = Run()  # a V1 API server's window that begins after its banner: its process names itself
    run.log("(APIServer pid=9) INFO 06-06 13:03:02 [utils.py:233] non-default args: {'model_tag': '../llama-3-8b'}\n"
            + "".join("(EngineCore_0 pid=21) " + line + "\n" for line in (engine + up).splitlines())
            + "(APIServer pid=9) INFO 06-06 13:03:55 [api_server.py:1600] Supported tasks: ['generate']\n")
    assert run.finish().outcome == "incomplete"
    run = Run()  # a window that begins after the engine's start: whatever runs it may hang there
    run.log(up)
    assert run.finish().outcome == "incomplete"
    run = Run()  # start-up went on after it (CUDA graphs still to capture)
    run.log(engine.replace("Maximum concurrency for 8,192 tokens per request: 4.49x",
                           "# GPU blocks: 979, # CPU blocks: 2048")
            + "INFO 06-06 13:03:36 model_runner.py:1008] Capturing the model for CUDA graphs.\n")
    assert run.finish().outcome == "incomplete"
    run = Run()
    run.log(engine + up)
    assert run.exit(1, at=2).outcome == "failed"
    run = Run()  # launched: the script exited cleanly once its engine was up
    run.log(engine + up, at=1)
    v = run.exit(0, at=2)
    assert v.outcome == "ready" and "init engine" in v.evidence["line"] and "an offline engine" in v.notes[0]


def test_an_sglang_log_ending_in_its_own_warm_up_is_ready_only_once_finished():
    # a window pasted after SGLang's HTTP server came up, ending in its warm-up
    # request (before the fired-up line): the server was up
    up = ('[2026-01-21 19:49:15] INFO:     Uvicorn running on http://0.0.0.0:43437 (Press CTRL+C to quit)\n'
          '[2026-01-21 19:49:16] INFO:     127.0.0.1:45016 - "GET /model_info HTTP/1.1" 200 OK\n'
          '[2026-01-21 19:49:16 DP0 TP0] Prefill batch, #new-seq: 1, #new-token: 6, #cached-token: 0, '
          'token usage: 0.00, #running-req: 0, #queue-req: 0, \n')
    run = Run()
    run.log(SGLANG_ARGS + up)
    v = run.finish()
    assert v.outcome == "ready" and "Uvicorn running on" in v.evidence["line"]
    assert v.notes and "during the server's own warm-up" in v.notes[0]
    run = Run(stall=60)  # watched live: silence in its warm-up is a warm-up that hangs
    run.log(SGLANG_ARGS + up, at=1)
    assert run.judge.decide(62).outcome == "stalled"
    run = Run()  # the interpreter going down after it: it never got there
    run.log(SGLANG_ARGS + up + "/usr/lib/python3.11/multiprocessing/resource_tracker.py:224: UserWarning: "
            "resource_tracker: There appear to be 1 leaked shared_memory objects to clean up at shutdown\n")
    assert run.finish().outcome == "incomplete"
    run = Run()
    run.log(SGLANG_ARGS + up, at=1)
    assert run.exit(1, at=2).outcome == "failed"
    # a window that begins after uvicorn's line: a request it answered says it was up
    answered = ('[2026-06-11 21:14:39] INFO:     172.17.0.1:34294 - "GET /model_info HTTP/1.1" 200 OK\n'
                '[2026-06-11 21:14:40] INFO:     172.17.0.1:34306 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n')
    run = Run()
    run.log(SGLANG_ARGS + answered)
    v = run.finish()
    assert v.outcome == "ready" and "POST /v1/chat/completions" in v.evidence["line"]
    run = Run(stall=60)
    run.log(SGLANG_ARGS + answered, at=1)
    assert run.judge.decide(62).outcome == "stalled"
    run = Run()  # a poll of /model_info alone is no request answered
    run.log(SGLANG_ARGS + answered.splitlines(keepends=True)[0])
    assert run.finish().outcome == "incomplete"
    # ranks waiting on a JIT build's lock that another rank holds: it had not finished warming up
    waits = ("[aiter] start build [module_rmsnorm] under /sgl-workspace/aiter/aiter/jit/build/module_rmsnorm\n"
             "[2025-12-09 10:58:15 TP3] waiting for baton release at /sgl-workspace/aiter/aiter/jit/build/lock_module_rmsnorm\n"
             "[2025-12-09 10:58:20 TP2] waiting for baton release at /sgl-workspace/aiter/aiter/jit/build/lock_module_rmsnorm\n")
    run = Run()
    run.log(SGLANG_ARGS + up + waits)
    v = run.finish()
    assert v.outcome == "incomplete" and v.evidence["lineno"] == SGLANG_ARGS.count("\n") + 6


def test_llamacpp_listening_before_model_load_is_not_ready():
    run = Run()
    run.log("main: HTTP server is listening, hostname: 127.0.0.1, port: 8080, http threads: 7\n"
            "main: loading model\n", at=1)
    assert run.judge.decide(1) is None
    v = run.log("llama_model_load: error loading model: failed to open /m.gguf: No such file or directory\n", at=2)
    assert v.outcome == "failed" and v.cause == "model_not_found"


@pytest.mark.parametrize("order,lineno", [
    (("HTTP server is listening | port=\"8080\"", "model loaded |", "all slots are idle |"), 2),  # mid-2024: listens first
    (("model loaded |", "HTTP server listening | port=\"8080\"", "all slots are idle |"), 2),  # early 2024: loads first
])
def test_llamacpp_is_ready_where_it_both_listens_and_has_its_model(order, lineno):
    run = Run(server="llamacpp")
    run.log("".join(f"INFO [                    main] {line} tid=\"1\" timestamp=1725256219\n" for line in order))
    v = run.finish()
    assert v.outcome == "ready" and v.evidence["lineno"] == lineno


def test_fatal_line_that_sounds_mild():
    v = Run().log("RuntimeError: CRITICAL WARNING: PyTorch 2.9.1 & CuDNN Compatibility Issue Detected\n"
                  "-----\nCurrent Environment: PyTorch 2.9.1+cu130 | CuDNN 9.13\n", at=1)
    assert v is None  # an exception waits for the process to end or the grace period
    run = Run()
    run.log("RuntimeError: CRITICAL WARNING: PyTorch 2.9.1 & CuDNN Compatibility Issue Detected\n", at=1)
    v = run.exit(1, at=1.5)
    assert v.outcome == "failed" and v.cause == "cudnn_version"


def test_warning_level_line_that_is_the_real_cause():
    run = Run()
    v = run.log("WARNING 02-28 20:57:36 _core_ext.py:180] Failed to import from vllm._core_C with "
                "ImportError('libtorch_hip.so: cannot open shared object file: No such file or directory')\n"
                "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
                "RuntimeError: Tried to instantiate class '_core_C.ScalarType', but it does not exist!\n", at=1)
    v = run.finish()
    assert v.outcome == "failed" and v.cause == "missing_shared_lib"
    assert v.evidence["line"].startswith("RuntimeError: Tried to instantiate")


@pytest.mark.parametrize("line", [
    "(EngineCore_DP0 pid=4) ERROR 08-03 15:21:53 [fa_utils.py:57] Cannot use FA version 2 is not supported due to FA2 is only supported on devices with compute capability >= 8",
    "(APIServer pid=1) WARNING 10-01 22:24:58 [_ipex_ops.py:16] Import error msg: No module named 'intel_extension_for_pytorch'",
    "(APIServer pid=1805) WARNING 04-25 08:50:55 [nixl_utils.py:34] NIXL is not available",
])
def test_benign_lines_with_error_words_do_not_fail(line):
    run = Run()
    run.log(VLLM_START + line + "\n", at=1)
    assert run.judge.decide(1000) is None
    v = run.log(VLLM_READY, at=2)
    assert v.outcome == "ready"
    assert any(b["line"] == line for b in v.benign)


def test_heartbeats_are_not_progress():
    run = Run(server="vllm", stall=60)
    run.log("(EngineCore pid=2) INFO 09-02 17:28:00 [gpu_model_runner.py:1] Starting to load model m...\n", at=0)
    beat = "(APIServer pid=3) DEBUG 09-02 17:29:06 [utils.py:777] Waiting for 1 local, 0 remote core engine proc(s) to start.\n"
    for t in range(10, 60, 10):
        assert run.log(beat, at=t) is None
    v = run.log(beat, at=61)
    assert v.outcome == "stalled"
    assert "Starting to load model" in v.evidence["line"]  # where it got, not what it waits on


def test_plain_log_lines_are_progress():
    run = Run(server="vllm", stall=60)
    for t in range(0, 300, 30):
        assert run.log(f"INFO 09-02 17:28:00 [x.py:1] step {t}\n", at=t) is None


def test_slow_loading_with_progress_is_never_stalled_or_timed_out():
    """The seed story: shards every ~270 s, a 300 s stall window, no hard timeout."""
    run = Run(server="sglang", stall=300)
    run.log("[2025-02-04 05:21:33] server_args=ServerArgs(model_path='m', attention_backend='triton')\n"
            "[2025-02-04 05:21:40 TP0] Load weight begin. avail mem=22.76 GB\n", at=0)
    for i, t in enumerate((270, 540, 810, 1080), start=1):
        assert run.judge.decide(t - 1) is None
        run.log(f"Loading safetensors checkpoint shards:  {i * 25}% Completed | {i}/4 [00:00<00:00, 1s/it]\n", at=t)
    v = run.log("[2025-02-04 05:29:23] The server is fired up and ready to roll!\n", at=1100)
    assert v.outcome == "ready" and v.config["attention_backend"] == "triton"


def test_sglang_0_5_19_arguments_as_a_dict_name_the_family_and_its_config():
    run = Run()
    run.log("[2026-10-30 12:00:00] server_args={'model_path': 'Qwen/Qwen3-8B', 'tp_size': 2, 'attention_backend': 'fa3'}\n"
            "[2026-10-30 12:00:05 TP0] Init parallel begin.\n"
            "[2026-10-30 12:10:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=True)\n", at=0)
    assert run.judge.server == "sglang" and run.judge.phase == "dist_init"
    assert run.judge.decide(1) is None  # a soft watchdog only dumps the stacks
    v = run.log("[2026-10-30 12:15:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)\n",
                at=900) or run.finish()
    assert (v.outcome, v.config["attention_backend"], v.config["tp_size"]) == ("failed", "fa3", 2)
    assert v.evidence["line"].endswith("self.soft=False)")


def test_progress_that_does_not_move_is_not_progress():
    run = Run(server="vllm", stall=100)
    bar = "Loading safetensors checkpoint shards:  75% Completed | 48/64 [00:10<00:01, 10.41it/s]\r"
    run.log(bar, at=0)
    run.log(bar, at=50)
    assert run.judge.decide(99) is None
    assert run.log(bar, at=101).outcome == "stalled"


def test_errors_after_ready_do_not_fail_a_ready_server():
    run = Run()
    run.log(VLLM_START + VLLM_READY, at=1)
    v = run.log("ERROR 05-12 02:47:14 [serving_chat.py:136] Error with model object='error' message='The model "
                "`x` does not exist.' type='NotFoundError' param=None code=404\n"
                "ERROR:    Exception in ASGI application\nTraceback (most recent call last):\n"
                "  File \"app.py\", line 1, in handle\nValueError: bad request\nINFO:     Shutting down\n", at=5)
    assert v.outcome == "ready"
    assert run.exit(0, at=6) is None  # a clean stop after ready is no failure
    assert run.finish().outcome == "ready"



def test_torch_compiles_error_footer_is_part_of_its_exception_not_a_failure_of_its_own():
    """TorchDynamo ends each error it raises with a footer ("Set TORCHDYNAMO_VERBOSE=1 ...").
    Printed in a fallback's warning before ready, or in a request's error after it, it is
    that exception's: the server goes on."""
    footer = ("Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're "
              'reporting a bug to PyTorch). For even more developer context, set TORCH_LOGS="+dynamo"')
    fallback = ("WARNING 05-01 10:00:10 [backends.py:100] torch.compile failed, falling back to eager mode:\n"
                f"torch._dynamo.exc.Unsupported: generator\n\n{footer}\n\n")
    assert _diagnosed(VLLM_START + fallback + VLLM_READY).outcome == "ready"
    prefix = "ERROR 05-01 10:05:00 [serving_completion.py:100] "
    request = "".join(prefix + line + "\n" for line in (
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/site-packages/vllm/entrypoints/openai/serving_completion.py", line 10, in create',
        "    x = f()", "torch._dynamo.exc.Unsupported: generator", "", footer))
    run = Run()
    run.log(VLLM_START + VLLM_READY, at=1)
    run.log(request + 'INFO:     127.0.0.1:5555 - "POST /v1/completions HTTP/1.1" 200 OK\n', at=5)
    assert run.finish().outcome == "ready"


def test_server_dying_after_ready_is_failed_in_serving():
    run = Run()
    run.log(VLLM_START + VLLM_READY, at=1)
    run.log("Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n", at=5)
    v = run.exit(1, at=6)
    assert v.outcome == "failed" and v.phase == "serving" and v.cause == "cuda_oom"


def worker_traceback(method: str) -> str:
    """A vLLM V1 worker's traceback, as its multiproc executor logs it, for a call of ``method``."""
    p = "(Worker_TP5 pid=3143006) ERROR 04-27 06:07:42 [multiproc_executor.py:962] "
    return "".join(p + line + "\n" for line in [
        "WorkerProc hit an exception.", "Traceback (most recent call last):",
        '  File "/v/vllm/v1/executor/multiproc_executor.py", line 957, in worker_busy_loop',
        "    output = func(*args, **kwargs)",
        f'  File "/v/vllm/v1/worker/gpu_worker.py", line 447, in {method}',
        "    return self.model_runner.run(x)",
        "RuntimeError: Expected all tensors to be on the same device, but got index is on cuda:5"])


def test_a_v1_worker_dying_in_its_model_step_after_ready_is_a_crash_before_the_engines_death_is_logged():
    # a window cut where the workers' tracebacks end: no EngineDeadError below them yet
    run = Run()
    run.log(VLLM_START + VLLM_READY + worker_traceback("execute_model"), at=5)
    v = run.finish()
    assert (v.outcome, v.phase) == ("failed", "serving")
    assert v.evidence["line"].endswith("RuntimeError: Expected all tensors to be on the same device, but got index "
                                       "is on cuda:5")
    other_call = Run()  # a failed utility call (add_lora): the engine answers it with an error and goes on
    other_call.log(VLLM_START + VLLM_READY + worker_traceback("add_lora"), at=5)
    assert other_call.finish().outcome == "ready"


def test_a_server_shutting_itself_down_after_a_named_cause_while_serving_is_failed():
    # the allocator's OOM is logged by C++ with no exception line; uvicorn then
    # shuts down with no signal from outside: the engine died of it
    oom = ("[rank3]:[E716 19:47:26.324588983 shim_common.cpp:523] Exception in aoti_torch: CUDA out of memory. "
           "Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 95.00 GiB of which 1.91 GiB is free.\n")
    down = "(APIServer pid=1) INFO:     Shutting down\n(APIServer pid=1) INFO:     Application shutdown complete.\n"
    run = Run()
    live = run.log(VLLM_START + VLLM_READY + oom + down, at=5)  # a watch that read it all at once
    assert (live.outcome, live.cause) == ("failed", "cuda_oom")
    v = run.finish()
    assert v.outcome == "failed" and v.cause == "cuda_oom" and v.phase == "serving"
    assert v.evidence["line"] == oom.strip()
    # a stop from outside first: the same lines are the stop's
    run = Run()
    run.log(VLLM_START + VLLM_READY + "INFO 10-12 00:30:00 launcher.py:57] Received SIGTERM, shutting down\n"
            + oom + down, at=5)
    assert run.finish().outcome == "ready"
    # the cause line with no shutdown after it: the server went on
    run = Run()
    run.log(VLLM_START + VLLM_READY + oom + "INFO:     127.0.0.1:5 - \"POST /v1/completions HTTP/1.1\" 200 OK\n", at=5)
    assert run.finish().outcome == "ready"


def test_an_exception_with_no_message_gives_way_to_the_one_raised_from_it():
    # vLLM logs the chain record by record: its blank lines are the bare prefix
    chain = "".join(f"ERROR 06-10 16:33:51 [core.py:398]{line}\n" for line in (
        " Traceback (most recent call last):", "   File \"/x/shm_broadcast.py\", line 1, in dequeue",
        "     raise TimeoutError", " TimeoutError", "",
        " The above exception was the direct cause of the following exception:", "",
        " Traceback (most recent call last):", "   File \"/x/multiproc_executor.py\", line 2, in collective_rpc",
        "     raise TimeoutError(f\"RPC call to {method} timed out.\") from e",
        " TimeoutError: RPC call to execute_model timed out."))
    run = Run()
    run.log(VLLM_START + chain, at=1)
    v = run.finish()
    assert v.outcome == "failed"
    assert v.evidence["line"].endswith("TimeoutError: RPC call to execute_model timed out.")


def test_a_window_pasted_while_serving_is_ready_despite_a_requests_traceback():
    # no start-up lines: the engine's stats say it generated; the error came while serving
    window = ("INFO 05-12 02:47:30 [loggers.py:111] Engine 000: Avg prompt throughput: 1146.4 tokens/s, "
              "Avg generation throughput: 52.1 tokens/s, Running: 1 reqs, Waiting: 0 reqs\n"
              "ERROR 05-12 02:47:31 [serving_chat.py:897] Traceback (most recent call last):\n"
              "ERROR 05-12 02:47:31 [serving_chat.py:897]   File \"/v/serving_chat.py\", line 1, in gen\n"
              "ERROR 05-12 02:47:31 [serving_chat.py:897] IndexError: list index out of range\n")
    assert _window(window).outcome == "ready"
    # a window whose stats show nothing generated proves nothing, and an engine's traceback then fails it
    idle = window.replace("52.1 tokens/s", "0.0 tokens/s")
    run = Run()
    run.log(idle.replace("[serving_chat.py:897]", "[core.py:897]"), at=1)
    assert run.finish().outcome == "failed"
    # logged by the OpenAI layer answering a request: the request's, not the server's failure
    run = Run()
    run.log(idle, at=1)
    assert run.finish().outcome == "incomplete"


@pytest.mark.parametrize("window", [
    # cut after the frames: the exception line alone, logged by the OpenAI layer
    "ERROR 06-04 11:39:38 [serving_chat.py:199] ValueError: /home/x/ckpt is not a multimodal model\n",
    # a tool parser's error (old vLLM: no bracket), cut inside its traceback
    "2025-03-21 07:44:04 ERROR 03-20 16:44:04 hermes_tool_parser.py:338]   File \"/v/hermes_tool_parser.py\", "
    "line 9, in extract\n"
    "2025-03-21 07:44:04 ERROR 03-20 16:44:04 hermes_tool_parser.py:338] AttributeError: 'NoneType' object has "
    "no attribute 'get'\n",
    # a request for a model the server does not serve, the log's last words
    "(APIServer pid=117702) ERROR 04-21 02:56:17 [serving.py:193] Error with model error=ErrorInfo(message='The "
    "model `Q` does not exist.', type='NotFoundError', param='model', code=404)\n",
])
def test_a_window_of_a_requests_error_logged_by_the_openai_layer_is_not_a_failure(window):
    assert _window(window).outcome == "incomplete"


def test_a_llamacpp_window_cut_after_its_start_is_ready_once_its_task_loop_runs():
    # a 2024 build's text log, cut after "HTTP server is listening" and "model loaded"
    window = ('INFO [            update_slots] all slots are idle | tid="0x368162012000" timestamp=1725261160\n'
              'INFO [      log_server_request] request | tid="0x368162012000" timestamp=1725261170 '
              'remote_addr="127.0.0.1" status=404 method="GET" path="/favicon.ico"\n')
    run = Run(server="llamacpp")
    run.log(window, at=1)
    verdict = run.finish()
    assert verdict.outcome == "ready" and "all slots are idle" in verdict.evidence["line"]


def test_a_llamacpp_window_of_slots_retrying_a_full_kv_cache_is_a_server_that_serves():
    # no banner, no ready line: a slot took a request, and its batches found no room in the
    # KV cache shared by the slots (llama-server retries them smaller and goes on)
    window = ("slot launch_slot_: id  1 | task 7 | processing task\n"
              "slot update_slots: id  1 | task 7 | prompt processing progress, n_past = 1119, n_tokens = 2048\n"
              "decode: failed to find a memory slot for batch of size 2048\n"
              "srv  update_slots: failed to find free space in the KV cache, retrying with smaller batch size, "
              "i = 0, n_batch = 1024, ret = 1\n"
              "decode: failed to find a memory slot for batch of size 1024\n")
    verdict = _window(window)
    assert verdict.outcome == "ready" and "processing task" in verdict.evidence["line"]


def test_sglangs_nan_check_in_a_window_with_no_banner_is_a_warning():
    # the sampler masks the NaNs and goes on; only SGLang's CI mode raises it
    window = "".join(f"[2024-11-08 04:44:04 TP{r}] Detected errors during sampling! NaN in the logits.\n"
                     for r in (0, 1, 0, 1))
    assert _window(window).outcome == "incomplete"


def test_mooncakes_failed_transfers_in_a_window_are_not_the_servers_failure():
    # the KV transfer of one request failed (the peer went away): the server goes on
    window = ("E0528 06:32:54.259475 735764 tcp_transport.cpp:170] Session::readBody failed. Error: End of file "
              "(value: 2), total_transferred_bytes_: 0, current transferred_bytes: 0\n"
              "E0603 20:16:59.295828 27384 worker_pool.cpp:271] Worker: Process failed for slice (opcode: 1, "
              "source_addr: 0x7f20fe081680, length: 65536, local_nic: mlx5_0, retry_cnt: 0): transport retry "
              "counter exceeded\n")
    assert _window(window).outcome == "incomplete"


@pytest.mark.parametrize("window, outcome", [
    # a text-generation-webui wrapper: llama-server's ready line, then the wrapper's own traceback
    ("main: server is listening on http://127.0.0.1:51389 - starting the main loop\n"
     "21:15:27-760271 ERROR    Failed to load the extension \"long_term_memory\".\n"
     "Traceback (most recent call last):\n"
     "  File \"C:\\tgw\\modules\\extensions.py\", line 37, in load_extensions\n"
     "IndentationError: expected an indented block after 'try' statement on line 7\n", "ready"),
    # Ctrl-C twice: llama-server exits at once, and Metal's assert on the way out is the stop's
    ("26.55.100.947 I srv    operator(): operator(): cleaning up before exit...\n"
     "Received second interrupt, terminating immediately.\n"
     "/Users/x/llama.cpp/ggml/src/ggml-metal/ggml-metal-device.m:618: GGML_ASSERT([rsets->data count] == 0) failed\n"
     "1   libggml-base.0.11.1.dylib           0x000000010589156c ggml_abort + 156\n", "incomplete"),
])
def test_a_llamacpp_window_with_no_banner_reads_its_ready_line_and_its_second_interrupt(window, outcome):
    assert _window(window).outcome == outcome


def test_an_exception_whose_request_is_answered_500_just_after_it_is_the_requests():
    # a window cut inside a request's traceback, its frames the media loader's: the access line says whose
    window = ("  File \"/v/vllm/multimodal/video.py\", line 136, in load_bytes\n"
              "    assert i == num_frames\n"
              "AssertionError: Expected reading 32 frames, but only loaded 17 frames from video.\n"
              "WARNING 07-01 09:52:23 [protocol.py:57] The following fields were present in the request but "
              "ignored: {'do_sample'}\n"
              "INFO:     10.178.76.128:20037 - \"POST /v1/chat/completions HTTP/1.1\" 500 Internal Server Error\n")
    assert _window(window).outcome == "ready"
    # another process's exception (the engine's) is not the request's
    engine = "".join(f"(EngineCore_DP0 pid=9) {line}\n" for line in window.splitlines()[:3])
    run = Run()
    run.log(engine + window.splitlines(keepends=True)[-1], at=1)
    assert run.finish().outcome == "failed"


def test_pytorchs_heartbeat_monitor_ending_a_serving_process_is_a_crash_of_the_error_above_it():
    # a rank's own error, a request answered (the window's only proof it was up), then
    # PyTorch's heartbeat monitor ends the process: the rank's error is the cause
    window = ("(Worker_TP0 pid=232) ERROR 09-07 20:59:45 [multiproc_executor.py:990] Traceback (most recent call "
              "last):\n"
              "(Worker_TP0 pid=232) ERROR 09-07 20:59:45 [multiproc_executor.py:990]   File \"/x/triton/compiler/"
              "compiler.py\", line 465, in _init_handles\n"
              "(Worker_TP0 pid=232) ERROR 09-07 20:59:45 [multiproc_executor.py:990] RuntimeError: Triton Error "
              "[CUDA]: operation not permitted\n"
              "(APIServer pid=1) INFO:     192.168.1.41:49968 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n"
              "[rank0]:[F907 21:17:46.111258352 ProcessGroupNCCL.cpp:1653] [PG ID 0 PG GUID 0 Rank 0] Terminating "
              "the process after attempting to dump debug info, due to collective timeout or exception.\n")
    v = _window(window)
    assert v.outcome == "failed" and v.evidence["lineno"] == 3


def test_a_pd_servers_aborted_requests_are_not_its_failure():
    # SGLang's prefill server of a PD pair: the decode side went away, each request is answered 500
    window = "".join(f"[2026-02-19 16:33:31 TP{r}] Prefill bootstrap failed for request rank={r} req.rid='be00' "
                     "req.bootstrap_room=21 with exception KVTransferError(bootstrap_room=21): Aborted by AbortReq.\n"
                     for r in range(4))
    assert _window(window).outcome == "ready"


def test_a_traceback_pasted_without_its_indent_is_still_one_traceback():
    # frames and source lines at the margin, one source line looking like "name: message"
    flat = ("Traceback (most recent call last):\n"
            "File \"/v/multimodal/utils.py\", line 9, in fetch\n"
            "modality: await asyncio.gather(*items)\n"
            "File \"/v/multimodal/video.py\", line 136, in load_bytes\n"
            "assert i == num_frames, (f\"Expected reading {num_frames} frames, \"\n"
            "AssertionError: Expected reading 32 frames, but only loaded 17 frames from video.\n")
    v = _failed(VLLM_START + flat)
    assert v.evidence["line"].startswith("AssertionError: Expected reading 32 frames")
    # under uvicorn's "Exception in ASGI application" it is a request's: the server took a request
    run = Run()
    run.log(VLLM_START + "ERROR:    Exception in ASGI application\n" + flat, at=1)
    v = run.finish()
    assert v.outcome == "ready" and v.evidence["line"] == "ERROR:    Exception in ASGI application"


REQUEST_500 = 'INFO:     59.82.59.90:0 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error\n'
SGLANG_REQUEST_ERROR = ("[2025-07-16 14:47:06] Error in request: \n"
                        "Traceback (most recent call last):\n"
                        '  File "/sgl/python/sglang/srt/function_call/kimik2_detector.py", line 217, in structure_info\n'
                        "    raise NotImplementedError()\n"
                        "NotImplementedError\n")


def test_a_window_of_requests_answered_with_errors_is_a_server_that_serves():
    # pasted while serving: an access line's 500, then the request's traceback
    run = Run()
    run.log(REQUEST_500 + SGLANG_REQUEST_ERROR)
    v = run.finish()
    assert v.outcome == "ready" and v.evidence["line"] == REQUEST_500.strip()
    # watched live, with no probe to ask, the silence after it says the same
    live = Run(stall=60)
    live.log(REQUEST_500 + SGLANG_REQUEST_ERROR, at=1)
    assert live.idle(at=2) is None
    v = live.judge.decide(62)
    assert v.outcome == "ready" and v.evidence["line"] == REQUEST_500.strip()


def test_a_requests_traceback_that_ends_in_the_engines_death_is_the_engines_failure():
    # vLLM V0 raises into every request what killed its engine loop, ending in AsyncEngineDeadError
    log = (REQUEST_500 + "ERROR:    Exception in ASGI application\n"
           "Traceback (most recent call last):\n"
           '  File "/v/vllm/engine/async_llm_engine.py", line 499, in engine_step\n'
           "    request_outputs = await self.engine.step_async()\n"
           "asyncio.exceptions.TimeoutError\n"
           "\n"
           "The above exception was the direct cause of the following exception:\n"
           "\n"
           "Traceback (most recent call last):\n"
           '  File "/v/vllm/engine/async_llm_engine.py", line 42, in _raise_exception_on_finish\n'
           "    raise AsyncEngineDeadError(\n"
           "vllm.engine.async_llm_engine.AsyncEngineDeadError: Background loop has errored already\n")
    v = _failed(log)
    assert (v.cause, v.evidence["line"]) == ("other", "asyncio.exceptions.TimeoutError")
    # a request's own error, with no engine death in it, stays the request's
    run = Run()
    run.log(REQUEST_500 + SGLANG_REQUEST_ERROR)
    assert run.finish().outcome == "ready"


# the frames of a request's traceback as uvicorn, starlette and fastapi print them (its header cut off)
REQUEST_FRAMES = ('  File "/py/site-packages/uvicorn/protocols/http/httptools_impl.py", line 409, in run_asgi\n'
                  "    result = await app(  # type: ignore[func-returns-value]\n"
                  '  File "/py/site-packages/fastapi/routing.py", line 212, in run_endpoint_function\n'
                  "    return await dependant.call(**values)\n"
                  '  File "/py/site-packages/vllm/multimodal/video.py", line 136, in load_bytes\n'
                  '    assert i == num_frames, (f"Expected reading {num_frames} frames, "\n'
                  "AssertionError: Expected reading 32 frames, but only loaded 17 frames from video.\n")


def test_a_window_that_starts_inside_a_requests_traceback_is_a_server_that_serves():
    # its frames say a request was being answered; the access line after says it was, with an error
    run = Run()
    run.log(REQUEST_FRAMES + REQUEST_500)
    v = run.finish()
    assert v.outcome == "ready" and v.evidence["line"] == REQUEST_500.strip()
    assert "answered requests" in v.notes[0]
    # vLLM's OpenAI layer logging a request's traceback, the window starting in its frames: no failure
    layer = "ERROR 06-04 11:39:38 [serving_chat.py:199] "
    logged = "".join(layer + line + "\n" for line in (
        '  File "/v/vllm/entrypoints/chat_utils.py", line 1193, in parse_chat_messages_futures',
        "    sub_messages = _parse_chat_message_content(",
        '  File "/v/vllm/multimodal/registry.py", line 268, in create_processor',
        '    raise ValueError(f"{model_config.model} is not a multimodal model")',
        "ValueError: /models/m is not a multimodal model"))
    run = Run()
    run.log(logged)
    assert run.finish().outcome == "incomplete"
    # the same error raised at start-up (lifespan, no request's frames) is the start's failure
    startup = REQUEST_FRAMES.replace("uvicorn/protocols/http/httptools_impl.py", "starlette/routing.py").replace(
        "run_asgi", "lifespan").replace("fastapi/routing.py", "fastapi/applications.py").replace(
        "run_endpoint_function", "startup")
    assert _failed(startup).evidence["line"].startswith("AssertionError: Expected reading 32 frames")


@pytest.mark.parametrize("frame", [
    # SGLang's OpenAI layer turning a chat request into its own (the window starts below handle_request)
    '  File "/sgl/python/sglang/srt/entrypoints/openai/serving_chat.py", line 66, in _convert_to_internal_request',
    # SGLang 0.4's adapter validating a chat request
    '  File "/sgl/python/sglang/srt/openai_api/adapter.py", line 1471, in v1_chat_completions',
    # starlette rendering a request's response
    '  File "/py/site-packages/starlette/responses.py", line 183, in render',
    # vLLM's OpenAI layer rendering a chat's prompt
    '  File "/v/vllm/entrypoints/openai/serving_engine.py", line 776, in _preprocess_chat',
])
def test_a_window_in_the_frames_of_an_openai_layer_answering_a_request_is_no_failure(frame):
    window = frame + "\n    x = f(request)\n" + '  File "/py/lib/x.py", line 1, in f\n' + "ValueError: bad request\n"
    run = Run()
    run.log(window)
    assert run.finish().outcome == "incomplete"


def test_a_requests_traceback_raised_in_vllms_engine_loop_is_the_engines_failure():
    # V0 raises what killed its background loop into the request that awaited it
    engine = REQUEST_FRAMES.replace(
        '  File "/py/site-packages/vllm/multimodal/video.py"',
        '  File "/v/vllm/engine/async_llm_engine.py", line 498, in run_engine_loop\n'
        "    has_requests_in_progress = await asyncio.wait_for(\n"
        '  File "/py/site-packages/vllm/multimodal/video.py"')
    v = _failed(VLLM_START + "ERROR:    Exception in ASGI application\nTraceback (most recent call last):\n" + engine)
    assert v.evidence["line"].startswith("AssertionError: Expected reading 32 frames")


def test_a_traceback_cut_off_before_its_exception_points_at_the_line_it_got_to():
    cut = ("Traceback (most recent call last):\n"
           '  File "/v/vllm/model_executor/models/mllama.py", line 1392, in forward\n'
           "    assert actual_len >= last_group_len\n")
    v = _failed(VLLM_START + cut)
    assert v.evidence["line"] == "    assert actual_len >= last_group_len"
    # a window of an error record's frames alone, cut off too, the same; frames with no level say nothing
    record = "".join(f"ERROR 01-01 00:00:09 [core.py:1] {line}\n" for line in cut.splitlines()[1:])
    v = _failed(VLLM_START + record)
    assert v.evidence["line"] == "ERROR 01-01 00:00:09 [core.py:1]     assert actual_len >= last_group_len"
    run = Run()
    run.log(VLLM_START + '  File "/l/lmdeploy/vl/engine.py", line 121, in preprocess\n    outputs = await future\n')
    assert run.finish().outcome == "incomplete"
    # frames with the log going on after them (a stack printed, no error) are no failure
    run = Run()
    run.log(VLLM_START + cut.split("\n", 1)[1] + "INFO 01-01 00:00:09 [gpu_model_runner.py:1] Loading model\n")
    assert run.finish().outcome != "failed"


def test_a_wrapper_quoting_another_workers_exception_gives_way_to_it():
    wrapper = ("(VllmWorkerProcess pid=8990) ERROR 01-07 13:38:08 [w.py:236] ValueError: Error in model execution "
               "(input dumped to /tmp/err.pkl): Attempted to assign 1 x 2074 = 2074 multimodal tokens to 2040 "
               "placeholders\n")
    root = ("(VllmWorkerProcess pid=8992) ERROR 01-07 13:38:08 [w.py:236] Traceback (most recent call last):\n"
            '(VllmWorkerProcess pid=8992) ERROR 01-07 13:38:08 [w.py:236]   File "/v/x.py", line 1, in f\n'
            "(VllmWorkerProcess pid=8992) ERROR 01-07 13:38:08 [w.py:236]     raise ValueError(\n"
            "(VllmWorkerProcess pid=8992) ERROR 01-07 13:38:08 [w.py:236] ValueError: Attempted to assign "
            "1 x 2074 = 2074 multimodal tokens to 2040 placeholders\n")
    v = _failed(VLLM_START + wrapper + root)
    assert v.evidence["line"].endswith("ValueError: Attempted to assign 1 x 2074 = 2074 multimodal tokens to 2040 "
                                       "placeholders")


def test_an_exception_re_raised_under_another_class_gives_way_to_the_first():
    # a caller catching the engine's AssertionError and raising its message as a RuntimeError
    first = ("Traceback (most recent call last):\n"
             '  File "/v/worker.py", line 195, in load_model\n'
             "    assert allocator.get_current_usage() == 0, (\n"
             "AssertionError: Sleep mode can only be used for one instance per process.\n\n")
    again = ("Traceback (most recent call last):\n"
             '  File "/u/vllm_utils.py", line 1527, in load_vllm\n'
             "    raise RuntimeError(error)\n"
             "RuntimeError: Sleep mode can only be used for one instance per process.\n")
    v = _failed(VLLM_START + first + again)
    assert v.evidence["line"] == "AssertionError: Sleep mode can only be used for one instance per process."


def test_an_empty_exception_raised_while_handling_an_empty_one_gives_way_to_it():
    chain = ("[rank0]: Traceback (most recent call last):\n"
             '[rank0]:   File "/v/weight_utils.py", line 9, in weight_loader\n'
             "[rank0]:     assert param.size() == loaded_weight.size()\n"
             "[rank0]: AssertionError\n\n"
             "[rank0]: During handling of the above exception, another exception occurred:\n\n"
             "[rank0]: Traceback (most recent call last):\n"
             '[rank0]:   File "/u/vllm_utils.py", line 1527, in load_vllm\n'
             "[rank0]:     raise RuntimeError(error)\n"
             "[rank0]: RuntimeError\n")
    assert _failed(VLLM_START + chain).evidence["line"] == "[rank0]: AssertionError"


def test_rocm_out_of_resources_with_no_free_memory_is_out_of_memory():
    line = (":0:rocdevice.cpp            :3671: 7357877802729 us:  Callback: Queue 0x78d551e00000 Aborting with "
            "error : HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources. "
            "Code: 0x1008 Available Free mem : 0 MB\n")
    assert _failed(VLLM_START + line).cause == "cuda_oom"
    assert _failed(VLLM_START + line.replace("Available Free mem : 0 MB", "")).cause == "other"


def test_a_cancelled_task_is_never_why_a_server_failed():
    # a wrapper's asyncio tasks cancelled as it shuts down, after the engine served: exit noise
    engine = ("INFO 09-18 09:25:10 llm_engine.py:240] Initializing a V0 LLM engine (v0.8.5.post1) with config: "
              "model='q', tokenizer='q'\n"
              "INFO 09-18 09:25:40 [llm_engine.py:437] init engine (profile, create kv cache, warmup model) took "
              "30.06 seconds\n")
    cancelled = ("[2025-09-18 09:25:53] ERROR base_events.py:1758: Exception in callback done_callback()\n"
                 "Traceback (most recent call last):\n"
                 '  File "/usr/lib/python3.10/asyncio/futures.py", line 196, in result\n'
                 "    raise exc\n"
                 "asyncio.exceptions.CancelledError\n")
    v = _diagnosed(engine + cancelled)
    assert v.outcome == "ready" and "init engine" in v.evidence["line"]
    v = _failed(VLLM_START + cancelled + "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert v.evidence["line"].endswith("an illegal memory access was encountered")


def test_a_warm_up_request_that_fails_says_why_the_start_failed():
    # SGLang's HTTP server is up and its own warm-up request fails on the API: no ready,
    # and the request's traceback is the start's
    run = Run()
    run.log(SGLANG_ARGS
            + "[2025-12-09 03:00:38] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)\n"
            + '[2025-12-09 03:00:39] INFO:     127.0.0.1:53916 - "GET /get_model_info HTTP/1.1" 200 OK\n'
            + "[2025-12-09 03:00:39] Error in request: Unimplemented model type: qwen2_5_vl_text\n"
            + "Traceback (most recent call last):\n"
            + '  File "/sgl/python/sglang/srt/entrypoints/openai/serving_base.py", line 112, in handle_request\n'
            + "    return await self._handle_non_streaming_request(\n"
            + "RuntimeError: Unimplemented model type: qwen2_5_vl_text\n"
            + '[2025-12-09 03:00:39] INFO:     127.0.0.1:53922 - "POST /v1/chat/completions HTTP/1.1" 500 Internal '
              "Server Error\n"
            + "[2025-12-09 03:00:39] Initialization failed. warmup error: Traceback (most recent call last):\n"
            + '  File "/sgl/python/sglang/srt/entrypoints/http_server.py", line 1, in _wait_and_warmup\n'
            + "AssertionError: {\"object\":\"error\",\"message\":\"Internal server error\"}\n")
    v = run.finish()
    assert (v.outcome, v.cause) == ("failed", "warmup_failed")
    assert v.evidence["line"] == "RuntimeError: Unimplemented model type: qwen2_5_vl_text"


# -- deadlines ---------------------------------------------------------------

def test_exit_before_ready_fails_at_once_with_the_last_line():
    run = Run(stall=300)
    run.log("loading something\n", at=1)
    v = run.exit(137, at=2)
    assert v.outcome == "failed" and v.exit_code == 137 and v.elapsed == 2
    assert v.evidence["line"] == "loading something"


def test_traceback_while_alive_gets_a_grace_period():
    run = Run(server="vllm", grace=30)
    run.log("Traceback (most recent call last):\n  File \"x.py\", line 1, in f\nValueError: boom\n"
            "INFO 01-01 00:00:00 [x.py:1] still here\n", at=10)
    assert run.judge.decide(39) is None
    assert run.judge.decide(40).outcome == "failed"


def test_traceback_then_progress_is_handled():
    run = Run(server="vllm", grace=30)
    run.log("Traceback (most recent call last):\n  File \"x.py\", line 1, in f\nImportError: optional thing\n"
            "INFO 01-01 00:00:00 [x.py:1] next\n", at=10)
    run.log("INFO 05-12 02:45:31 [gpu_model_runner.py:1329] Starting to load model m...\n", at=20)
    assert run.judge.decide(100) is None
    assert run.log(VLLM_READY, at=110).outcome == "ready"


def test_another_processs_progress_does_not_handle_an_exception():
    # vLLM-Omni: stage 0's worker raised; stage 1's model runner, another process, went on loading
    err = "(Worker pid=2291010) [Stage-0] ERROR 03-12 08:22:28 [multiproc_executor.py:800] "
    run = Run(server="vllm")
    run.log(err + "Traceback (most recent call last):\n"
            + err + '  File "/v/vllm/v1/worker/utils.py", line 227, in request_memory\n'
            + err + "    raise ValueError(\n"
            + err + "ValueError: Free memory on device cuda:0 (111.99/139.8 GiB) on startup is less than "
                    "desired GPU memory utilization (0.95, 132.81 GiB).\n"
            "(Worker pid=2291010) [Stage-0] INFO 03-12 08:22:28 [multiproc_executor.py:749] Parent process exited, "
            "terminating worker\n"
            "[Stage-1] INFO 03-12 08:22:28 [diffusion_model_runner.py:133] Model loading took 26.4738 GiB "
            "and 13.178609 seconds\n")
    v = run.finish()
    assert v.outcome == "failed" and v.cause == "cuda_oom" and "[Stage-0]" in v.evidence["line"]
    run = Run(server="vllm")  # its own stage going on: handled
    run.log(err + "Traceback (most recent call last):\n" + err + "ImportError: optional thing\n"
            "(Worker pid=2291010) [Stage-0] INFO 03-12 08:22:29 [gpu_model_runner.py:1329] Starting to load model m...\n")
    assert run.finish().outcome == "incomplete"


def test_a_progress_bar_first_seen_after_an_exception_has_not_moved():
    # vLLM's RPC timed out, then the client's bar (never moved past its first reading), then the
    # engine's death it caused: the bar did not clear the timeout, which stays the root
    timeout = ("Traceback (most recent call last):\n"
               '  File "/v/vllm/v1/executor/multiproc_executor.py", line 193, in collective_rpc\n'
               '    raise TimeoutError(f"RPC call to {method} timed out.") from e\n'
               "TimeoutError: RPC call to execute_model timed out.\n")
    dead = ("Traceback (most recent call last):\n"
            '  File "/v/vllm/v1/engine/core_client.py", line 558, in get_output\n'
            "    raise self._format_exception(outputs) from None\n"
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
            "See stack trace (above) for the root cause.\n")
    run = Run(server="vllm", grace=30)
    run.log(timeout + "  0%|          | 0/1 [19:42<?, ?it/s]\n" + dead, at=10)
    v = run.finish()
    assert (v.outcome, v.cause, v.evidence["line"]) == ("failed", "other", timeout.splitlines()[-1])


def test_hard_timeout_while_progressing():
    run = Run(server="vllm", stall=100, timeout=250)
    for t in range(0, 250, 20):
        assert run.log(f"INFO 01-01 00:00:00 [x.py:1] working {t}\n", at=t) is None
    assert run.judge.decide(250).outcome == "timeout"


def test_stall_window_without_any_line():
    run = Run(server="vllm", stall=300)
    run.log("INFO 01-01 00:00:00 [parallel_state.py:1] rank 0 in world size 1 is assigned as DP rank 0\n", at=0)
    assert run.judge.decide(299) is None
    v = run.judge.decide(300)
    assert v.outcome == "stalled" and v.phase == "dist_init"


def test_a_stall_says_what_the_phase_it_stalled_in_was_doing_and_what_to_check():
    run = Run(server="vllm", stall=300)
    run.log("INFO 01-01 00:00:00 [parallel_state.py:1] rank 0 in world size 1 is assigned as DP rank 0\n", at=0)
    v = run.judge.decide(300)
    assert "communication" in v.explanation and "NCCL_DEBUG=INFO" in v.remedy and "py-spy" in v.remedy


TF_DUMP = """[transformers] Loading /models/tiny-llama
[transformers] loading configuration file /models/tiny-llama/config.json
[transformers] Model config LlamaConfig {
  "architectures": [
    "LlamaForCausalLM"
  ],
  "vocab_size": 2048
}

"""


@pytest.mark.parametrize("chunks", [[TF_DUMP], TF_DUMP.splitlines(keepends=True)], ids=["at once", "line by line"])
def test_a_start_silent_after_a_dump_got_to_the_line_that_began_it_not_its_closing_brace(chunks):
    run = Run(stall=300)
    for chunk in chunks:
        run.log(chunk, at=0)
    stalled = run.judge.decide(300)
    assert (stalled.outcome.value, stalled.evidence) == (
        "stalled", {"line": "[transformers] Model config LlamaConfig {", "lineno": 3})
    assert run.finish().evidence["lineno"] == 3


def test_a_line_repeated_word_for_word_is_no_progress_but_a_changing_one_is():
    # a wrapper's retry loop printing the same words each second is stuck, whatever it prints
    run = Run(stall=15)
    for t in range(0, 20):
        run.log("waiting for /mnt/models to be mounted...\n", at=t)
    assert run.judge.decide(15).outcome == "stalled"
    # a loader that counts (no rule knows its words) is going on
    run = Run(stall=15)
    for t in range(0, 20):
        assert run.log(f"loaded layer {t} of 80\n", at=t) is None


@pytest.mark.parametrize("code, said, cause", [
    (-9, "SIGKILL", "other"), (137, "SIGKILL", "other"),  # its own return code, or a shell's status for it
    (-11, "SIGSEGV", "segfault"), (139, "SIGSEGV", "segfault"), (-6, "SIGABRT", "segfault"),
    (1, "exited before it was ready", "other")])
def test_an_exit_with_no_error_line_says_the_signal_that_ended_it(code, said, cause):
    run = Run(server="vllm", stall=300)
    run.log("INFO 01-01 00:00:00 [default_loader.py:1] Loading weights took 0.03 seconds\n", at=0)
    v = run.exit(code, at=1)
    assert (v.outcome.value, v.cause) == ("failed", cause) and said in v.explanation


@pytest.mark.parametrize("code, said", [(-15, "SIGTERM"), (-2, "SIGINT"), (143, "SIGTERM"), (130, "SIGINT")])
def test_an_exit_on_a_stop_signal_with_no_error_line_is_a_stop_from_outside(code, said):
    # (a process's own return code, or a shell wrapper's exit status for the signal)
    run = Run(server="vllm", stall=300)
    run.log("INFO 01-01 00:00:00 [default_loader.py:1] Loading weights took 0.03 seconds\n", at=0)
    v = run.exit(code, at=1)
    assert v.outcome == "incomplete" and said in v.explanation and "Loading weights" in v.evidence["line"]
    run = Run(server="vllm", stall=300)  # with an error in its log, the error decides
    run.log("INFO 01-01 00:00:00 [default_loader.py:1] Loading weights took 0.03 seconds\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n", at=0)
    assert run.exit(code, at=1).outcome == "failed"


def test_probe_evidence_keeps_a_silent_server_alive():
    run = Run(server="vllm", stall=20)
    run.log("INFO 01-01 00:00:00 [x.py:1] Warming up model for the compilation...\n", at=0)
    for t in range(5, 60, 5):
        run.judge.feed(Signal("evidence", data={"read_bytes": t}), t)
        assert run.judge.decide(t) is None
    assert run.judge.decide(81).outcome == "stalled"


def test_a_new_run_in_the_same_log_starts_over():
    run = Run()
    run.log(VLLM_START + "vllm serve: error: unrecognized arguments: --bogus\n", at=1)
    run.log(VLLM_START + VLLM_READY, at=2)
    assert run.finish().outcome == "ready"


def test_phase_durations_follow_the_clock():
    run = Run(server="sglang")
    run.log("[2025-01-01 00:00:00] server_args=ServerArgs(model_path='m')\n", at=0)
    run.log("[2025-01-01 00:00:00] Load weight begin. avail mem=1 GB\n", at=5)
    run.log("[2025-01-01 00:00:00] KV Cache is allocated. #tokens: 1\n", at=36)
    run.log("[2025-01-01 00:00:00] Capture cuda graph begin.\n", at=38)
    v = run.log("[2025-01-01 00:00:00] The server is fired up and ready to roll!\n", at=133)
    assert v.phases == {"init": 5, "weights": 31, "kv_cache": 2, "cuda_graphs": 95, "serving": 0}


def probe(status, generate=None, ready=False, owner=None):
    data = {"status": status, "ready": ready}
    if owner is not None:
        data["owner"] = owner
    if generate is not None:
        data["generate"] = generate
    return Signal("probe", line="GET /health", data=data)


def test_a_ready_line_waits_for_the_port_to_answer():
    run = Run(confirm=2.0)
    run.log(VLLM_START + VLLM_READY, at=1)
    assert run.judge.decide(1.5) is None
    run.judge.feed(probe(200), 1.6)
    assert run.judge.decide(1.6).outcome == "ready"
    late = Run(confirm=2.0)  # a port that never answers does not hold ready back for ever
    late.log(VLLM_START + VLLM_READY, at=1)
    assert late.judge.decide(3.1).outcome == "ready"


def test_bind_failure_within_the_confirmation_window_is_failed():
    run = Run(confirm=2.0)
    run.log(VLLM_START + VLLM_READY, at=1)
    run.judge.feed(probe(None), 1.2)
    assert run.judge.decide(1.2) is None
    assert run.exit(1, at=1.4).outcome == "failed"


def test_probe_generate_holds_ready_until_a_token_comes_back():
    run = Run(confirm=2.0, require_generate=True, stall=60)
    run.log(VLLM_START + VLLM_READY, at=1)
    run.judge.feed(probe(200, generate=503), 2)
    assert run.judge.decide(30) is None
    run.judge.feed(probe(200, generate=200, ready=True), 31)
    assert run.judge.decide(31).outcome == "ready"


def test_a_port_answering_while_the_unheld_log_still_starts_is_another_servers():
    # no process known for the log (none holds it open), the port held by a visible process:
    # the answer stands only once the log stays quiet; a line after it proves it another server's
    start = "[transformers] Loading /m/tiny-llama\n"
    run = Run(server="transformers", confirm=2.0, stall=15, quiet=2.0)
    run.log(start, at=0.0)
    run.judge.feed(probe(200, ready=True, owner="unchecked"), 0.1)
    assert run.judge.decide(0.1) is None
    assert run.log('[transformers] loading configuration file /m/tiny-llama/config.json\n', at=0.2) is None
    run.judge.feed(probe(200, ready=True, owner="unchecked"), 3.0)
    assert run.judge.decide(5.0) is None  # disproved: only the log decides now
    assert run.judge.decide(20.0).outcome == "stalled"
    # a log still empty when the port answered: the start it will show comes after the answer
    empty = Run(server="transformers", confirm=2.0, stall=15, quiet=2.0)
    empty.judge.feed(probe(200, ready=True, owner="unchecked"), 0.1)
    assert empty.judge.decide(2.5) is None
    assert empty.log(start, at=3.0) is None and empty.judge.decide(6.0) is None
    # a server already up whose log stays quiet: its answer stands after the window
    quiet = Run(server="transformers", confirm=2.0, stall=15, quiet=2.0)
    quiet.log(start, at=0.0)
    quiet.judge.feed(probe(200, ready=True, owner="unchecked"), 0.1)
    assert quiet.judge.decide(1.0) is None
    v = quiet.judge.decide(2.2)
    assert v.outcome == "ready" and any("no process is known for this log" in n for n in v.notes)


def test_health_200_is_ready_where_the_family_says_so():
    run = Run(server="llamacpp")
    run.judge.feed(probe(503), 1)
    assert run.judge.decide(1) is None
    run.judge.feed(probe(200, ready=True), 2)
    v = run.judge.decide(2)
    assert v.outcome == "ready" and v.evidence == {"line": "GET /health", "lineno": 0}


def test_history_gives_a_slow_phase_a_longer_stall_window():
    run = Run(server="sglang", stall=60, stall_for={"cuda_graphs": 300})
    run.log("[2025-01-01 00:00:00] Load weight begin. avail mem=1 GB\n", at=0)
    assert run.judge.decide(61).outcome == "stalled"  # weights: the default window
    run = Run(server="sglang", stall=60, stall_for={"cuda_graphs": 300})
    run.log("[2025-01-01 00:00:00] Capture cuda graph begin.\n", at=0)
    assert run.judge.decide(200) is None
    assert run.judge.decide(300).outcome == "stalled"


# -- a log watched alone (no process known) -------------------------------

SGLANG_ARGS = '[2025-04-09 05:05:13] server_args=ServerArgs(model_path="m", tp_size=1)\n'
CUDNN_TRACEBACK = ('Traceback (most recent call last):\n'
                   '  File "/x/launch_server.py", line 1, in <module>\n'
                   'RuntimeError: cuDNN version incompatibility: PyTorch was compiled against cuDNN 9.8 '
                   'but the system runtime is cuDNN 9.6\n')


def test_log_only_exception_then_silence_is_failed_after_the_quiet_period():
    run = Run(server="sglang", quiet=2.0, stall=300)
    run.log(SGLANG_ARGS, at=0)
    assert run.log(CUDNN_TRACEBACK, at=10) is None  # the block is still open: a chain could follow
    assert run.idle(at=10.5) is None  # closed: its exception is pending
    assert run.judge.next_deadline() == 12.0
    assert run.judge.decide(11.9) is None
    v = run.judge.decide(12.0)
    assert v.outcome == "failed" and v.cause == "cudnn_version"
    assert v.evidence["line"].startswith("RuntimeError: cuDNN version incompatibility")


VLLM_ENGINE_FAILED = (
    "(EngineCore pid=9) ERROR 08-03 21:49:23 [core.py:1231] EngineCore failed to start.\n"
    "(EngineCore pid=9) ERROR 08-03 21:49:23 [core.py:1231] Traceback (most recent call last):\n"
    '(EngineCore pid=9) ERROR 08-03 21:49:23 [core.py:1231]   File "/v/vllm/v1/engine/core.py", line 1200, in run_engine_core\n'
    "(EngineCore pid=9) ERROR 08-03 21:49:23 [core.py:1231]     engine_core = EngineCoreProc(*args, **kwargs)\n")
VLLM_ENGINE_FAILED_REST = (
    '(EngineCore pid=9) ERROR 08-03 21:49:23 [core.py:1231]   File "/v/vllm/v1/core/kv_cache_utils.py", line 760, in _check\n'
    "(EngineCore pid=9) ERROR 08-03 21:49:23 [core.py:1231]     raise ValueError(\n"
    "(EngineCore pid=9) ERROR 08-03 21:49:23 [core.py:1231] ValueError: To serve at least one request with the "
    "model's max seq len (262144), (18.35 GiB KV cache is needed, which is larger than the available KV cache "
    "memory (8.72 GiB).\n"
    "(EngineCore pid=9) Process EngineCore:\n")


@pytest.mark.parametrize("known", [{"quiet": 2.0}, {}], ids=["log alone", "process known"])
def test_a_traceback_cut_before_its_exception_line_waits_for_it(known):
    """A writer's buffer (a block-buffered stdout, a relay) may hold the rest of
    a traceback for a while: its header and frames name no cause, so neither
    the quiet period nor the settle decides until its exception comes, or
    until ``grace`` passes without it."""
    run = Run(server="vllm", stall=300, grace=30, **known)
    run.log(VLLM_START, at=0)
    assert run.log(VLLM_ENGINE_FAILED, at=10) is None
    assert run.idle(at=10.5) is None
    assert run.judge.next_deadline() == 40.0
    assert run.judge.decide(15) is None
    v = run.log(VLLM_ENGINE_FAILED_REST, at=16)
    v = v or run.idle(at=16.5) or run.judge.decide(19)
    assert v.outcome == "failed" and v.cause == "kv_cache_too_small"
    assert v.evidence["line"].startswith("(EngineCore pid=9) ERROR 08-03 21:49:23 [core.py:1231] ValueError: To serve")
    # its rest never comes: grace after its last line, the verdict stands on what is there
    cut = Run(server="vllm", stall=300, grace=30, **known)
    cut.log(VLLM_START, at=0)
    cut.log(VLLM_ENGINE_FAILED, at=10)
    assert cut.idle(at=10.5) is None and cut.judge.decide(39.9) is None
    assert cut.judge.decide(40).outcome == "failed"


@pytest.mark.parametrize("start", [
    "common_download_file_single_online: no previous model file found C:\\llama.cpp\\m_preset.ini\n"
    "common_download_file_single_online: HEAD failed, status: 404\n",
    VLLM_START + "(APIServer pid=6787) [transformers] Unrecognized keys in `rope_parameters` for "
                 "'rope_type'='default': {'sliding_window'}\n",
    "You are using a model of type llama to instantiate a model of type . This is not supported for all "
    "configurations of models and can yield errors.\n",
], ids=["llama.cpp's HEAD check", "transformers' rope keys", "transformers' model type"])
def test_a_start_cut_after_a_warning_its_loader_goes_on_after_is_incomplete(start):
    """A log read while the server still starts (or pasted cut there) whose last
    line is a warning the start goes on after: no failure in it yet."""
    run = Run()
    run.log(start)
    assert run.finish().outcome == "incomplete"


def test_a_second_vllm_run_appended_after_a_failed_one_is_judged_on_its_own_failure():
    """The first run's traceback, its exception read, belongs to that run even
    though no line of its process follows to close it: the second run's banner
    ends that run, and the log's verdict is the second run's failure."""
    logo = "(APIServer pid={pid}) INFO 06-07 13:18:43 [utils.py:299]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version {v}\n"
    run = Run()
    run.log(logo.format(pid=1, v="0.20.0")
            + "(APIServer pid=1) Traceback (most recent call last):\n"
            + '(APIServer pid=1)   File "/v/vllm/config/vllm.py", line 1, in __post_init__\n'
            + "(APIServer pid=1) ValueError: Chunked MM input disabled but max_tokens_per_mm_item (2496) is larger "
              "than max_num_batched_tokens (2048). Please increase max_num_batched_tokens.\n"
            + logo.format(pid=2, v="0.25.1")
            + "(EngineCore pid=3) ERROR 08-03 21:49:23 [core.py:1231] ValueError: To serve at least one request with "
              "the model's max seq len (262144), (18.35 GiB KV cache is needed, which is larger than the available KV "
              "cache memory (8.72 GiB).\n")
    v = run.finish()
    assert v.outcome == "failed" and v.cause == "kv_cache_too_small" and v.version == "0.25.1"


def test_a_module_a_python_warning_says_is_missing_after_the_root_names_no_cause():
    """An optional import's UserWarning (another restart's process, written after
    the failure) is no cause of the error above it, as a WARNING record is not."""
    run = Run(server="vllm")
    run.log(VLLM_START
            + "(EngineCore_DP0 pid=214) subprocess.CalledProcessError: Command '' died with <Signals.SIGHUP: 1>.\n"
            + "(APIServer pid=41) RuntimeError: Engine core initialization failed. See root cause above. "
              "Failed core proc(s): {}\n"
            + "(EngineCore_DP0 pid=207) /opt/conda/lib/python3.12/site-packages/neuronx_distributed/modules/moe/"
              "blockwise.py:102: UserWarning: Warning: Failed to import blockwise_mm_bwd: No module named "
              "'neuronxcc.nki._private.blockwise_mm'\n")
    v = run.finish()
    assert v.outcome == "failed" and v.cause == "other"
    assert "CalledProcessError" in v.evidence["line"]


def test_with_a_process_known_the_quiet_period_does_not_apply():
    run = Run(server="sglang", stall=300, grace=30)  # quiet=None: the exit will tell
    run.log(SGLANG_ARGS + CUDNN_TRACEBACK, at=0)
    run.idle(at=0.5)
    assert run.judge.decide(20) is None
    assert run.exit(1, at=21).cause == "cudnn_version"


def test_log_only_start_stopped_from_outside_is_incomplete_after_the_quiet_period_not_the_stall_window():
    shards = "INFO 10-12 00:26:55 [weight_utils.py:1] Loading safetensors checkpoint shards:  50% 2/4\n"
    stop = ('(APIServer pid=1) Traceback (most recent call last):\n'
            '(APIServer pid=1)   File "api_server.py", line 1920, in signal_handler\n'
            '(APIServer pid=1) KeyboardInterrupt: terminated\n')
    run = Run(quiet=2.0, stall=300)
    run.log(VLLM_START + shards, at=1)
    assert run.log(stop, at=5) is None
    run.idle(at=5.5)
    assert run.judge.next_deadline() == 7.0
    assert run.judge.decide(6.9) is None
    v = run.judge.decide(7.0)
    assert v.outcome == "incomplete" and "stopped from outside" in v.explanation  # no hang: exit 5, not 3
    assert v.evidence["line"] == shards.rstrip("\n")  # where it had got
    known = Run(stall=300)  # quiet=None: a process known, its exit will tell
    known.log(VLLM_START + shards + stop, at=1)
    known.idle(at=1.5)
    assert known.judge.decide(60) is None
    v = known.exit(-15, at=61)
    assert v.outcome == "incomplete" and "stopped from outside" in v.explanation


def test_a_calm_line_after_a_handled_exception_disarms_the_quiet_period():
    run = Run(quiet=2.0, stall=60, settle=0.5)
    run.log(VLLM_START + "ERROR 10-12 00:26:51 x.py:1] Traceback (most recent call last):\n"
            '  File "x.py", line 1, in f\nImportError: optional kernel not found\n', at=1)
    run.idle(at=1.5)
    run.log("INFO 10-12 00:26:52 x.py:9] Falling back to the slow path\n", at=2)
    assert run.judge.decide(10) is None  # silent but went on: not failed at 4 s
    assert run.log(VLLM_READY, at=11) is None  # waits for a bind error (no probe)
    assert run.judge.decide(11.5).outcome == "ready"


def test_shutdown_lines_after_an_exception_do_not_disarm_it():
    run = Run(quiet=2.0, stall=60)
    run.log("INFO:     Started server process [1]\nINFO:     Waiting for application startup.\n"
            "ERROR:    Traceback (most recent call last):\n"
            '  File "x.py", line 1, in f\nValueError: the model config has no field "rope"\n'
            "INFO:     Waiting for application shutdown.\nINFO:     Application shutdown complete.\n", at=1)
    assert run.idle(at=1.5) is None  # no family: the lines held for it are read now
    v = run.judge.decide(3.0)
    assert v.outcome == "failed" and v.evidence["line"].startswith("ValueError")


def test_a_native_crash_watched_live_waits_for_its_stack():
    run = Run(quiet=2.0, stall=60, settle=0.5)
    assert run.log(VLLM_START + "Caught signal 11 (Segmentation fault: address not mapped to object at address 0x3)\n",
                   at=1) is None  # its stack is still to come
    run.log(" 1 0x00000000000494f4 uploadProxyOps()  /dvs/p4/build/sw/gpgpu/nccl/gitfusion/stable/src/enqueue.cc:1131\n",
            at=1.2)
    v = run.judge.decide(2)
    assert v.outcome == "failed" and v.cause == "nccl" and v.evidence["lineno"] == 2


def test_a_stall_window_with_an_exception_pending_is_failed_not_stalled():
    run = Run(quiet=2.0, stall=5)
    run.log(VLLM_START + "Traceback (most recent call last):\n  File \"x\", line 1\nValueError: bad\n"
            "INFO 10-12 00:26:52 x.py:9] carrying on\n", at=1)
    assert run.judge.decide(4) is None
    assert run.judge.decide(6).outcome == "failed"


def test_log_only_ready_before_the_bind_waits_for_the_settle_period():
    run = Run(settle=0.5)
    assert run.log(VLLM_START + VLLM_READY, at=1) is None
    assert run.judge.next_deadline() == 1.5
    v = run.log("ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): "
                "address already in use\n", at=1.01)
    assert v.outcome == "failed" and v.cause == "port_in_use"
    fired = Run(server="sglang", settle=0.5)  # a ready line printed after the bind needs no wait
    assert fired.log(SGLANG_ARGS + "[2025-04-09 05:05:21] The server is fired up and ready to roll!\n",
                     at=1).outcome == "ready"


@pytest.mark.parametrize("line, port", [
    ("ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use", "8000"),
    ("0.00.065.436 E srv         start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8083", "8083"),
    ("OSError: [Errno 98] Address already in use", "PORT"),  # no port named: the placeholder stays
])
def test_a_bind_failure_naming_its_port_puts_it_in_the_command_to_find_the_holder(line, port):
    v = _diagnosed(line + "\n")
    assert v.cause == "port_in_use" and f"grep :{port}`" in v.remedy


def test_a_health_200_from_someone_elses_port_is_not_ready():
    run = Run(confirm=2.0, stall=30)
    run.judge.feed(probe(200, ready=True, owner="foreign"), 1)
    assert run.judge.decide(1) is None
    run.log(VLLM_START + VLLM_READY, at=2)  # the new server's ready line: the port is still the old one's
    run.judge.feed(probe(200, ready=True, owner="foreign"), 2.5)
    assert run.judge.decide(5) is None
    assert run.exit(1, at=6).outcome == "failed"


def test_a_health_200_whose_owner_cannot_be_checked_is_ready_with_a_note():
    run = Run(server="vllm", confirm=2.0)
    run.judge.feed(probe(200, ready=True, owner="unknown"), 1)
    v = run.judge.decide(1)
    assert v.outcome == "ready" and "could not be checked" in v.notes[0]
    mine = Run(server="vllm", confirm=2.0)
    mine.judge.feed(probe(200, ready=True, owner="tree"), 1)
    assert mine.judge.decide(1).notes == []


# -- the root-cause policy (judge.py's docstring) ----------------------------

def _window(text: str):
    """The verdict on a window of a log, pasted with no server named."""
    run = Run()
    run.log(text, at=1)
    return run.finish()


def _failed(text: str, server=None):
    run = Run(server=server)
    run.log(text)
    v = run.finish()
    assert v.outcome == "failed"
    return v


def test_a_chained_import_failure_names_the_import_that_explains_the_fallback():
    v = _failed(
        "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n"
        "ModuleNotFoundError: No module named 'common_ops'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n"
        "ImportError: /x/sgl_kernel/sm100/common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEab\n")
    assert v.cause == "undefined_symbol"
    assert v.evidence["line"].startswith("ImportError: /x/sgl_kernel")
    v = _failed(
        "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n"
        "ModuleNotFoundError: No module named 'common_ops'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n"
        "ImportError: libnvrtc.so.12: cannot open shared object file: No such file or directory\n")
    assert v.cause == "missing_shared_lib"


def test_a_traceback_cut_before_its_exception_takes_the_error_logged_with_it():
    # logging's exception(): the handler's message, then the traceback
    v = _failed("2025-05-16T04:56:18.119Z ERROR engine.run_mp_engine: NIXL_ERR_BACKEND\n"
                "Traceback (most recent call last):\n"
                "  File \"/v/vllm/engine/multiprocessing/engine.py\", line 586, in run_mp_engine\n"
                "    engine = MQLLMEngine.from_vllm_config(\n")
    assert v.cause == "other" and v.evidence["line"].endswith("run_mp_engine: NIXL_ERR_BACKEND")
    # a line above it that is no error record says nothing of it: where it got to is the evidence
    v = _failed("INFO 05-16 04:56:18 [engine.py:1] Initialized NIXL agent\n"
                "Traceback (most recent call last):\n"
                "  File \"/v/vllm/engine/multiprocessing/engine.py\", line 586, in run_mp_engine\n"
                "    engine = MQLLMEngine.from_vllm_config(\n")
    assert v.evidence["line"] == "    engine = MQLLMEngine.from_vllm_config("


@pytest.mark.parametrize("native", [
    "E1104 06:35:19.118512 2368741 nixl_agent.cpp:473] registerMem: registration failed for all backends",
    "E0000 00:00:1762238119.118504 2368741 gpunetio_backend.cpp:1105] Can't register memory for unknown device 3",
    "[1754890927.298391] [decode-0:270  :0]    ib_mlx5dv_md.c:1100 UCX  ERROR mlx5_7: ibv_modify_qp failed: No such device",
])
def test_a_native_librarys_error_record_is_where_a_wordless_failure_arose(native):
    v = _failed(f"{native}\n[2025-11-04 06:35:19 TP3] Scheduler hit an exception: Traceback (most recent call last):\n",
                server="sglang")
    assert v.cause == "other" and v.evidence["line"] == native


def test_a_librarys_first_report_is_where_a_log_that_ends_on_its_reports_arose():
    # NVSHMEM reporting each step of its failed set-up, then its bootstrap giving up:
    # no exception, no exit line, the log ends on its words
    first = "/w/nvshmem/src/modules/transport/ibrc/ibrc.cpp:418: non-zero status: 22 ibv_modify_qp failed"
    others = "".join(f"host:12:{n} [4] NCCL INFO Channel {n:02d}/0 : 4[4] -> 5[5] via P2P/IPC\n" for n in range(30))
    v = _failed(f"{first}\n{others}/w/nvshmem/src/host/init/init.cu:1007: non-zero status: 7 nvshmem setup "
                "connections failed\n/w/nvshmem/src/modules/bootstrap/uid/bootstrap_uid.cpp:571: non-zero status: -6 "
                "barrier failed\n")
    assert v.cause == "other" and v.evidence["line"] == first


def test_an_error_is_not_traced_back_to_a_warning_of_the_same_cause_above_it():
    # ggml's Vulkan backend warns that pinned memory is short and goes on; the
    # driver's own out-of-memory word, then the device lost, is where it failed
    warned = ("5.06.482.253 W ggml_vulkan: Failed to allocate pinned memory (Requested buffer size exceeds device "
              "buffer size limit: ErrorOutOfDeviceMemory)")
    radv = "radv/amdgpu: Not enough memory for command submission."
    v = _failed(f"{warned}\n{radv}\nterminate called after throwing an instance of 'vk::DeviceLostError'\n"
                "  what():  vk::Queue::submit: ErrorDeviceLost\n", server="llamacpp")
    assert v.cause == "cuda_oom" and v.evidence["line"] == radv


def test_a_cc_files_record_is_left_to_its_own_pack():
    # TensorFlow's registration noise on import (and Triton's records, which its pack reads)
    noise = ("E0000 00:00:1750755252.315513  244589 cuda_dnn.cc:8310] Unable to register cuDNN factory: "
             "Attempting to register factory for plugin cuDNN when one has already been registered")
    v = _failed(f"{noise}\n[2025-11-04 06:35:19 TP3] Scheduler hit an exception: Traceback (most recent call last):\n",
                server="sglang")
    assert v.evidence["line"] != noise


_HUB_401 = (
    "Traceback (most recent call last):\n"
    "  File \"/v/huggingface_hub/utils/_http.py\", line 409, in hf_raise_for_status\n"
    "    response.raise_for_status()\n"
    "  File \"/v/requests/models.py\", line 1026, in raise_for_status\n"
    "    raise HTTPError(http_error_msg, response=self)\n"
    "requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: "
    "https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json\n\n"
    "The above exception was the direct cause of the following exception:\n\n"
    "Traceback (most recent call last):\n")


def test_an_exception_its_handler_says_again_in_its_own_words_gives_way_to_it():
    # the hub client raises requests' HTTPError again as its GatedRepoError
    v = _failed(_HUB_401 + "  File \"/v/huggingface_hub/utils/_http.py\", line 426, in hf_raise_for_status\n"
                "    raise _format(GatedRepoError, message, response) from e\n"
                "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-66e6)\n")
    assert v.cause == "model_not_found" and v.evidence["line"].startswith("huggingface_hub.errors.GatedRepoError")
    # a window cut before the hub's own error: requests' is the root
    v = _failed(_HUB_401)
    assert v.cause == "model_not_found" and v.evidence["line"].startswith("requests.exceptions.HTTPError: 401")


@pytest.mark.parametrize("chain,evidence", [
    # a lookup a handler caught, then raised the error that says what failed
    ("During handling of the above exception, another exception occurred:", "ValueError: Can't patch loop"),
    # raised from it: the first is the root
    ("The above exception was the direct cause of the following exception:", "RuntimeError: There is no current"),
])
def test_a_lookup_a_handler_caught_gives_way_to_the_error_it_raised(chain, evidence):
    v = _failed(
        "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n"
        "RuntimeError: There is no current event loop in thread 'Thread-1 (_launch_server)'.\n\n"
        f"{chain}\n\n"
        "Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n"
        "ValueError: Can't patch loop of type <class 'uvloop.Loop'>\n")
    assert v.cause == "other" and v.evidence["line"].startswith(evidence)


def test_torchscripts_wrapper_gives_way_to_the_exception_its_message_ends_in():
    # TorchScript's own tracebacks inside the message: source lines at any indent
    v = _failed(
        "Traceback (most recent call last):\n  File \"module.py\", line 1786, in _call_impl\n"
        "    return forward_call(*args, **kwargs)\n"
        "RuntimeError: The following operation failed in the TorchScript interpreter.\n"
        "Traceback of TorchScript, serialized code (most recent call last):\n"
        "  File \"code/__torch__/spmd.py\", line 17, in forward\n    return (nxd_model).forward(_0, )\n"
        "class NxDModel(Module):\n  __parameters__ = []\n\n"
        "Traceback of TorchScript, original code (most recent call last):\n"
        "  File \"/x/neuronx_distributed/trace/spmd.py\", line 32, in forward\n"
        "            output = self.models[bucket_idx].forward(inputs)\n"
        "RuntimeError: Failed to execute the model status=1006 message=Execution Out-Of-Bounds Memory Access\n")
    assert v.evidence["line"].startswith("RuntimeError: Failed to execute the model") and v.evidence["lineno"] == 14


@pytest.mark.parametrize("warning,cause,lineno", [
    # the library that registers the namespace's ops did not load: why the op is missing
    ("WARNING 09-18 10:33:14 [camem.py:64] Failed to import vllm_ascend_C:libvllm_ascend_kernels.so: cannot open "
     "shared object file: No such file or directory. Sleep mode will be disabled.", "missing_shared_lib", 1),
    # another library's: the op is missing from this build
    ("UserWarning: Warning: Cannot load xpu CCL. CCL doesn't work for XPU device due to libccl.so: cannot open "
     "shared object file: No such file or directory", "arch_unsupported", 4),
])
def test_a_kernel_op_missing_from_its_namespace_is_explained_only_by_its_own_library(warning, cause, lineno):
    v = _failed(
        f"{warning}\nTraceback (most recent call last):\n  File \"torch/_ops.py\", line 1, in __getattr__\n"
        "AttributeError: '_OpNamespace' '_C_ascend' object has no attribute 'weak_ref_tensor'\n", server="vllm")
    assert (v.cause, v.evidence["lineno"]) == (cause, lineno)


def test_an_exception_the_server_logged_as_a_warning_names_no_later_failure_cause():
    warn = "(EngineCore pid=1) WARNING 06-11 01:28:03 [import_utils.py:408] "
    error = "(EngineCore pid=1) ERROR 06-11 01:28:58 [core.py:1199] "
    v = _failed(
        f"{warn}Traceback (most recent call last):\n{warn}  File \"deep_gemm/__init__.py\", line 16, in <module>\n"
        f"{warn}ImportError: cannot import name '_C' from partially initialized module 'vllm.third_party.deep_gemm' "
        "(most likely due to a circular import)\n"
        f"{error}Traceback (most recent call last):\n{error}  File \"flashinfer/prefill.py\", line 720, in paged_run\n"
        f"{error}RuntimeError: Error in function 'BatchPrefillWithPagedKVCacheDispatched' at prefill.cuh:3201: "
        "Unsupported max_mma_kv: 0\n", server="vllm")
    assert v.cause == "other" and v.evidence["lineno"] == 6


def test_a_bare_assertion_error_is_read_with_the_assert_its_traceback_shows():
    v = _failed("Traceback (most recent call last):\n"
                "  File \"/sgl/python/sglang/srt/models/qwen2.py\", line 105, in __init__\n"
                "    assert self.total_num_heads % tp_size == 0\n"
                "AssertionError\n")
    assert v.cause == "bad_argument" and v.evidence["line"] == "AssertionError"


def test_a_log_pasted_indented_as_a_whole_is_read_as_written():
    v = _failed("    [2025-02-14 02:47:45 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                "      File \"/sgl/python/sglang/srt/models/qwen2.py\", line 105, in __init__\n"
                "        assert self.total_num_heads % tp_size == 0\n"
                "    AssertionError\n")
    assert v.cause == "bad_argument" and v.evidence == {"line": "    AssertionError", "lineno": 4}


@pytest.mark.parametrize("read", ["whole", "cut after the carriage return"])
def test_a_progress_bars_redraw_does_not_undo_the_indent_of_a_log_pasted_indented(read):
    # the indent is added at each line's start; a tqdm redraw after a carriage return has none
    warning = "    (EngineCore_DP0 pid=7) WARNING 10-01 22:25:00 [import_utils.py:408] "
    error = "    (EngineCore_DP0 pid=7) ERROR 10-01 22:25:02 [core.py:718] "
    text = ("    INFO 10-01 22:24:54 [api_server.py:1896] vLLM API server version 0.10.2\n"
            "    Loading safetensors checkpoint shards:   0% Completed | 0/2 [00:00<?, ?it/s]\r"
            "Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:01<00:00, 1.0s/it]\n"
            + warning + "Traceback (most recent call last):\n"
            + warning + '  File "/x/deep_gemm/__init__.py", line 16, in <module>\n'
            + warning + "    from . import _C\n"
            + warning + "ImportError: cannot import name '_C' from partially initialized module 'deep_gemm'\n"
            + error + "Traceback (most recent call last):\n"
            + error + '  File "/x/core.py", line 1, in f\n'
            + error + "ValueError: No available memory for the cache blocks.\n")
    run = Run()
    cut = text.index("\r") + 1 if read != "whole" else len(text)  # a read that ends on the carriage return
    run.log(text[:cut])
    run.log(text[cut:], at=1.0)
    v = run.finish()
    assert (v.outcome, v.cause, v.evidence["lineno"]) == ("failed", "cuda_oom", 9)


def test_a_log_pasted_as_a_markdown_quote_is_read_as_written():
    v = _failed("> [2025-02-14 02:47:40 TP0] Init torch distributed begin.\n"
                ">\n"  # a blank line of the quote
                "> [2025-02-14 02:47:45 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                ">   File \"/sgl/python/sglang/srt/models/qwen2.py\", line 105, in __init__\n"
                ">     assert self.total_num_heads % tp_size == 0\n"
                "> AssertionError\n")
    assert v.cause == "bad_argument" and v.evidence == {"line": "> AssertionError", "lineno": 6}


TRACEBACK_WINDOW = ("  File \"/sgl/python/sglang/srt/models/qwen2.py\", line 105, in __init__\n"
                    "    assert self.total_num_heads % tp_size == 0\n"
                    "AssertionError\n")


@pytest.mark.parametrize("paste", ["    ", "> ", "> > "])
def test_a_window_that_starts_in_a_frame_pasted_indented_or_quoted_is_read_as_written(paste):
    # the first line a frame (two spaces in, as Python prints it) under the paste's own indent or quote
    window = "".join(paste + line + "\n" for line in TRACEBACK_WINDOW.splitlines())
    v = _failed(window)
    assert v.cause == "bad_argument" and v.evidence == {"line": paste + "AssertionError", "lineno": 3}



def test_a_kernel_build_that_failed_is_evidenced_by_the_compilers_own_error():
    v = _failed("Traceback (most recent call last):\n"
                "  File \"/x/flashinfer/jit/cpp_ext.py\", line 380, in run_ninja\n"
                "    raise RuntimeError(msg) from e\n"
                "RuntimeError: Ninja build failed. Ninja output:\n"
                "FAILED: [code=1] /root/.cache/flashinfer/cached_ops/batch_prefill/batch_prefill.cuda.o\n"
                "/root/.cache/flashinfer/generated/batch_prefill.cu:1:10: fatal error: "
                "flashinfer/attention/prefill.cuh: No such file or directory\n"
                "compilation terminated.\n"
                "ninja: build stopped: subcommand failed.\n")
    assert v.cause == "compile_error" and v.evidence["lineno"] == 6


def test_a_kernel_build_whose_output_holds_no_compiler_error_is_evidenced_by_itself():
    # the line below is another exception of the chain, a wrapper: not the compiler's output
    v = _failed("Traceback (most recent call last):\n"
                "  File \"/x/flashinfer/jit/cpp_ext.py\", line 380, in run_ninja\n"
                "    raise RuntimeError(msg) from e\n"
                "RuntimeError: Ninja build failed. Ninja output:\n"
                "Exception: Capture cuda graph failed: Error building extension 'batch_prefill'\n")
    assert v.cause == "compile_error" and v.evidence["lineno"] == 4


NCCL_WARN = ("gpu01:2777:5429 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-v2jS20 "
             "to 9637892 bytes\n"
             "gpu01:2777:5429 [0] NCCL INFO transport/shm.cc:114 -> 2\n")


def test_an_nccl_failure_is_evidenced_by_nccls_own_word_where_the_call_failed():
    v = _failed(NCCL_WARN + "Traceback (most recent call last):\n"
                "  File \"/x/vllm/distributed/parallel_state.py\", line 9, in init\n"
                "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n")
    assert v.cause == "nccl" and v.evidence["lineno"] == 1


def test_nccls_word_between_two_processes_copies_of_its_failure_is_the_evidence():
    # a worker on the other node fails first; the driver's NCCL says why, then fails the same way
    failure = "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n"
    v = _failed("(RayWorkerWrapper pid=221, ip=172.19.0.143) Traceback (most recent call last):\n"
                "(RayWorkerWrapper pid=221, ip=172.19.0.143)   File \"/x/vllm/distributed/pynccl.py\", line 9, in init\n"
                "(RayWorkerWrapper pid=221, ip=172.19.0.143) " + failure +
                "node1:908:1048 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
                "fe80::1cec:56ff:fe9c:9ac7%11<42363> failed : Network is unreachable\n"
                "Traceback (most recent call last):\n"
                "  File \"/x/vllm/distributed/pynccl.py\", line 9, in init\n" + failure)
    assert v.cause == "nccl" and v.evidence["lineno"] == 4


def test_an_exception_no_rule_explains_after_nccl_failed_is_nccls_failure():
    # vLLM 0.4's pynccl checked NCCL's return code with a bare assert
    v = _failed(NCCL_WARN + "Traceback (most recent call last):\n"
                "  File \"/x/vllm/model_executor/parallel_utils/pynccl.py\", line 257, in all_reduce\n"
                "    assert result == 0\n"
                "AssertionError\n")
    assert v.cause == "nccl" and v.evidence["lineno"] == 1


def test_an_nccl_warning_that_says_nothing_failed_names_no_cause():
    v = _failed("gpu01:213:213 [1] graph/search.cc:1127 NCCL WARN Could not find a path for pattern 4, "
                "falling back to simple order\n"
                "Traceback (most recent call last):\n"
                "  File \"/x/vllm/model_executor/model_loader/loader.py\", line 9, in load\n"
                "RuntimeError: shape mismatch in weight loader\n")
    assert v.cause == "other" and v.evidence["lineno"] == 4


def test_a_cuda_kernel_fault_the_nccl_watchdog_reports_first_is_the_workers_not_nccls():
    ima = "CUDA error: an illegal memory access was encountered"
    v = _failed(f"[rank0]:[E611 01:51:09.940 ProcessGroupNCCL.cpp:1896] [PG ID 2 Rank 0] Process group watchdog "
                f"thread terminated with exception: {ima}\n"
                "terminate called after throwing an instance of 'c10::DistBackendError'\n"
                "Traceback (most recent call last):\n"
                "  File \"/x/vllm/v1/executor/multiproc_executor.py\", line 522, in worker_busy_loop\n"
                f"RuntimeError: {ima}\n")
    # the watchdog reports the fault; the worker's own exception is where it arose
    assert v.cause == "other" and v.evidence["lineno"] == 5


def test_a_device_lost_after_a_kernel_fault_is_its_consequence():
    v = _failed("Traceback (most recent call last):\n  File \"/x/sglang/srt/managers/scheduler.py\", line 9, in run\n"
                "RuntimeError: CUDA error: an illegal memory access was encountered\n"
                "Traceback (most recent call last):\n  File \"/x/sglang/srt/managers/scheduler.py\", line 9, in run\n"
                "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable\n")
    assert v.cause == "other" and v.evidence["lineno"] == 3


def test_a_compiler_diagnostic_says_why_its_pass_manager_failed():
    v = _failed("/x/sglang/srt/layers/moe/ep_moe/kernels.py:606:42: error: Unsupported conversion from "
                "'f8E4M3FN' to 'f16'\n"
                "Traceback (most recent call last):\n"
                "  File \"/x/triton/compiler/compiler.py\", line 9, in compile\n"
                "RuntimeError: PassManager::run failed\n")
    assert v.cause == "arch_unsupported" and v.evidence["lineno"] == 1


def test_a_native_crash_whose_stack_is_in_nccls_code_is_nccls():
    v = _failed("[gpu-50:345:0:4945] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x3)\n"
                "==== backtrace (tid: 212877) ====\n"
                " 0 0x0000000000042520 __sigaction()  ???:0\n"
                " 2 0x0000000000049b8a addProxyOpIfNeeded()  /dvs/p4/build/sw/gpgpu/nccl/gitfusion/stable/src/enqueue.cc:180\n"
                "Segmentation fault (core dumped)\n")
    assert v.cause == "nccl" and v.evidence["lineno"] == 1


def test_a_native_crash_whose_stack_names_no_known_library_stays_a_segfault():
    v = _failed("Caught signal 11 (Segmentation fault: address not mapped to object at address 0x3)\n"
                " 2 0x0000000000049b8a launch_kernel()  /src/csrc/custom_all_reduce.cu:180\n"
                "Segmentation fault (core dumped)\n")
    assert v.cause == "segfault" and v.evidence["lineno"] == 1


def test_a_log_that_ends_on_error_lines_is_evidenced_by_their_first_copy():
    hccl = ("ERROR 10-11 11:32:59 [model_runner_v1.py:3556] EI0006: [PID: {}] 2025-10-11-11:32:29.335.888 "
            "Getting socket times out. Reason: Remote Rank did not send the data in time.")
    v = _failed("".join(f"(Worker_TP{r} pid={r}) " + hccl.format(r) + "\n"
                        f"(Worker_TP{r} pid={r}) ERROR 10-11 11:32:59 [model_runner_v1.py:3556]         Transport "
                        "init error. Reason: [Create][DestLink]Create Dest error!\n" for r in (11, 12)))
    assert v.cause == "nccl" and v.evidence["lineno"] == 1


def test_a_message_several_ranks_repeat_is_evidenced_by_its_first_copy():
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    v = _failed(f"[rank0]: {oom}\n[rank1]: {oom}\n[rank0]: RuntimeError: NCCL error: unhandled system error\n")
    assert v.cause == "cuda_oom" and v.evidence["lineno"] == 1


def test_output_glued_together_gives_way_to_the_whole_copy_after_it():
    """Threads that printed an assert at once leave one line holding several
    copies (or a wrapped fragment of one before it); a progress bar with no line
    end leaves its bar in front of the error: the next line holding the message
    alone is the root. A copy behind
    another process's prefix (Ray's) is a copy, not glued output."""
    site = "/src/ik_llama.cpp/ggml/src/./iqk/fa/iqk_fa_templates.h:1146: "
    clean = site + "GGML_ASSERT(fms.S[j] > 0) failed"
    v = _failed(site + clean + site + clean + "\n" + clean + "\n" + clean + "\nAborted (core dumped)\n", server="llamacpp")
    assert v.evidence == {"line": clean, "lineno": 2}
    v = _failed("fa/iqk_fa_templates.h:1146: " + clean + "\n" + clean + "\n", server="llamacpp")
    assert v.evidence["lineno"] == 2  # a terminal wrapped a copy: its fragment, then the whole
    v = _failed(clean + "\nGGML_ASSERT(fms.S[j] > 0) failed\n", server="llamacpp")
    assert v.evidence["lineno"] == 1  # a copy without its source location is no whole of it
    bar = " 13%|██▏         | 3/23 [00:11<00:55,  2.79s/it]"
    cuda = "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:368 'an illegal memory access was encountered'"
    v = _failed(bar + cuda + "\n" + cuda + "\n", server="sglang")
    assert v.evidence == {"line": cuda, "lineno": 2}
    # the bar, then the glued line's own prefix; the copy is the cause near a root naming none
    npu = "compiler_depend.ts:444] ReshapeAndCacheOperation setup failed!"
    v = _failed(f"{bar}[rank15]:[E1224 01:14:28.932556327 {npu}\n[rank8]:[E1224 01:14:28.932566777 {npu}\n"
                "RuntimeError: The Inner error is reported as above. The process exits for this inner error.\n",
                server="sglang")
    assert v.evidence == {"line": f"[rank8]:[E1224 01:14:28.932566777 {npu}", "lineno": 2}
    zero = "ERROR 12-17 09:40:09 worker_base.py:467] ZeroDivisionError: integer division or modulo by zero"
    v = _failed(f"(RayWorkerWrapper pid=148818, ip=10.164.0.37) {zero}\n{zero}\n", server="vllm")
    assert v.evidence["lineno"] == 1


def test_a_cpp_abort_after_a_python_error_is_that_error():
    v = _failed("RuntimeError: CUDA error: device-side assert triggered\n"
                "terminate called after throwing an instance of 'c10::Error'\n"
                "  what():  CUDA error: device-side assert triggered\nAborted (core dumped)\n")
    assert v.cause == "other"
    assert v.evidence["line"] == "RuntimeError: CUDA error: device-side assert triggered"


def test_a_cpp_abort_after_an_nccl_watchdog_is_nccl():
    watchdog = ("[rank1]:[E219 08:58:31.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.")
    v = _failed(watchdog + "\nterminate called after throwing an instance of 'c10::DistBackendError'\n"
                "Fatal Python error: Aborted\n")
    assert v.cause == "nccl" and v.evidence["line"] == watchdog


def test_nccls_watchdog_reporting_after_its_dump_gives_the_evidence_to_its_first_word():
    # the watchdog's own line, the failed collective's stack (the dump), a minute later its report,
    # then the abort quoting the report
    watchdog = ("[rank1]:[E825 00:42:25.854022710 ProcessGroupNCCL.cpp:689] [Rank 1] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=3474, OpType=_ALLGATHER_BASE) ran for 600079 milliseconds "
                "before timing out.")
    report = ("[rank1]:[E825 00:43:25.869125306 ProcessGroupNCCL.cpp:2119] [PG ID 2 PG GUID 3 Rank 1] Process group "
              "watchdog thread terminated with exception: [Rank 1] Watchdog caught collective operation timeout: "
              "WorkNCCL(SeqNum=3474, OpType=_ALLGATHER_BASE) ran for 600079 milliseconds before timing out.")
    stack = "".join(f"#{i} frame_{i} from /x/torch/distributed/c10d.py:{i}\n" for i in range(35))
    v = _failed(watchdog + "\n" + stack + report + "\nterminate called after throwing an instance of "
                "'c10::DistBackendError'\n  what():  " + report.split("] ", 2)[2] + "\n")
    assert v.cause == "nccl" and v.evidence["line"] == watchdog


def test_an_abort_alone_is_a_segfault():
    v = _failed("loading\nterminate called after throwing an instance of 'std::runtime_error'\n")
    assert v.cause == "segfault"


def test_tgis_download_step_failing_is_the_exception_its_traceback_ends_in():
    # the launcher's last word ("Error: DownloadError", Rust's) printed under the traceback's header,
    # before its frames: no Python exception, and the download step's failure says only where it failed
    v = _failed("2023-06-19T08:20:19.513324Z ERROR text_generation_launcher: Download encountered an error: "
                "Traceback (most recent call last):\n"
                "Error: DownloadError\n\n"
                "  File \"/opt/conda/lib/python3.9/site-packages/text_generation_server/utils/convert.py\", line 20, "
                "in check_file_size\n"
                "    raise RuntimeError(\n\n"
                "RuntimeError: The file size different is more than 5%:\n", server="tgi")
    assert v.cause == "other" and v.evidence["lineno"] == 7


def test_a_subprocess_exit_notice_after_its_own_traceback_is_that_traceback():
    v = _failed("[2025-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                "  File \"s.py\", line 1, in run\n"
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n"
                "[2025-01-01 00:00:01] Subprocess scheduler_0 crashed with exit code -6\n", server="sglang")
    assert v.cause == "cuda_oom" and v.evidence["line"].startswith("torch.OutOfMemoryError")


def test_a_subprocess_exit_notice_alone_is_worker_died_with_that_line():
    v = _failed("[2025-01-01 00:00:00] Load weight begin.\n"
                "[2025-01-01 00:00:01] Subprocess scheduler_0 crashed with exit code -6\n", server="sglang")
    assert v.cause == "worker_died"
    assert v.evidence["line"].endswith("crashed with exit code -6")


def test_a_shell_kill_after_an_error_is_not_the_cause():
    v = _failed("[rank0]: RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered\nKilled\n")
    assert v.cause == "other" and v.evidence["lineno"] == 1


def test_a_stop_from_outside_after_ready_is_ready():
    run = Run()
    run.log(VLLM_START + VLLM_READY)
    run.log("(APIServer pid=1) KeyboardInterrupt: terminated\n"
            "ERROR 04-11 09:53:58 [multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 338 died, exit code: -15\n"
            "terminate called after throwing an instance of 'std::runtime_error'\n")
    v = run.finish()
    assert v.outcome == "ready"
    ready_at = (VLLM_START + VLLM_READY).count("\n")
    assert v.notes == [f"the server was ready (at line {ready_at}), then was stopped from outside at line "
                       f"{ready_at + 1}, 1 line later: (APIServer pid=1) KeyboardInterrupt: terminated"]
    shut = Run()
    shut.log(VLLM_START + VLLM_READY + "INFO:     Shutting down\nINFO:     Finished server process [7]\n")
    assert any(f"then shut down at line {ready_at + 2}" in note for note in shut.finish().notes)
    # a V1 worker's signal handler, then the engine noticing its worker gone
    killed = Run()
    killed.log(VLLM_START + VLLM_READY + "(Worker_TP3 pid=5) WARNING 04-27 12:22:48 [multiproc_executor.py:884] "
               "WorkerProc was terminated\n(APIServer pid=1) INFO:     Shutting down\n(EngineCore pid=4) ERROR 04-27 "
               "12:22:53 [multiproc_executor.py:283] Worker proc VllmWorker-0 died unexpectedly, shutting down "
               "executor.\n")
    assert killed.finish().outcome == "ready"


def test_a_stop_from_outside_before_ready_is_incomplete():
    run = Run()
    run.log(VLLM_START + "INFO 05-26 18:56:23 [ray_utils.py:233] Waiting for creating a placement group of specs for "
            "150 seconds. specs=[{'GPU': 1.0}, {'GPU': 1.0}].\n"
            "ERROR 05-26 18:58:11 [engine.py:448] SystemExit: 15\n"
            "Traceback (most recent call last):\n  File \"e.py\", line 1, in run\nKeyboardInterrupt\n")
    v = run.finish()
    assert v.outcome == "incomplete"
    assert "Waiting for creating a placement group" in v.evidence["line"]  # where it had got, not the stop
    assert "livenessProbe" in v.remedy  # what stops a slow start on Kubernetes


def test_tgi_stopped_before_ready_says_only_that_it_shuts_its_shards_down():
    # docker stop: the launcher names no signal, it ends what it started; after a
    # shard's failure it shuts them down too, but its error comes first
    start = ("2025-10-13T22:11:56.268439Z  INFO shard-manager: text_generation_launcher: Starting shard rank=0\n"
             "2025-10-13T22:12:06.000000Z  INFO shard-manager: text_generation_launcher: Waiting for shard to be "
             "ready... rank=0\n")
    stop = ("2025-10-13T22:12:09.100000Z  INFO text_generation_launcher: Shutting down shards\n"
            "2025-10-13T22:12:09.100100Z  INFO shard-manager: text_generation_launcher: Terminating shard rank=0\n"
            "2025-10-13T22:12:09.100200Z  INFO shard-manager: text_generation_launcher: Waiting for shard to "
            "gracefully shutdown rank=0\n")
    run = Run(server="tgi")
    run.log(start + stop)
    v = run.finish()
    assert v.outcome == "incomplete" and "stopped from outside" in v.explanation
    assert "Waiting for shard to be ready" in v.evidence["line"]
    run = Run(server="tgi", quiet=2.0, stall=300)  # watched with no process known: said once it is quiet
    run.log(start + stop, at=1)
    run.idle(at=1.5)
    assert run.judge.decide(3.1).outcome == "incomplete"
    run = Run(server="tgi")
    run.log(start + "2025-10-13T22:12:09.000000Z ERROR text_generation_launcher: Shard 0 failed to start\n" + stop)
    assert run.finish().outcome == "failed"


@pytest.mark.parametrize("stop", [
    "^C\n",
    "^CTraceback (most recent call last):\n  File \"x.py\", line 9, in <module>\n    llm = LLM(model=m)\nKeyboardInterrupt\n",
    "\nTraceback (most recent call last):\n  File \"x.py\", line 9, in <module>\nKeyboardInterrupt: terminated\n",
    # multiprocessing names the child above its traceback
    "(EngineCore pid=3408798) Process EngineCore:\n(EngineCore pid=3408798) Traceback (most recent call last):\n"
    "(EngineCore pid=3408798)   File \"x.py\", line 9, in run\n(EngineCore pid=3408798) KeyboardInterrupt\n",
    # a warning an import printed just before, with the source line Python echoes under it
    "/v/messages.py:74: FutureWarning: ImageChunk has moved to 'mistral_common.protocol.instruct.chunk'.\n"
    "  warnings.warn(msg, FutureWarning)\n^CTraceback (most recent call last):\n  File \"x.py\", line 9\nKeyboardInterrupt\n",
    # a notebook cell interrupted: IPython's rule, header and frames, its KeyboardInterrupt with no message
    "-" * 75 + "\nKeyboardInterrupt                         Traceback (most recent call last)\nCell In[1], line 76\n"
    "---> 76 res = run_vllm(batch_size)\n\nKeyboardInterrupt: \n",
])
def test_a_start_stopped_from_outside_got_to_the_line_before_the_stop(stop):
    """The line before the stop (or before the traceback it ends) is where the
    start had got, though no rule reads it: what a reader of the log points at."""
    run = Run()
    run.log(VLLM_START + "WARNING 04-14 19:51:24 [utils.py:2273] We must use the `spawn` multiprocessing start method.\n"
            "INFO 04-14 19:51:36 [custom_all_reduce_utils.py:203] generating GPU P2P access cache in /c/p2p.json\n"
            + stop)
    v = run.finish()
    assert v.outcome == "incomplete"
    assert v.evidence["line"].endswith("generating GPU P2P access cache in /c/p2p.json")
    assert v.evidence["lineno"] == VLLM_START.count("\n") + 2


def test_a_start_that_ends_going_down_got_to_its_last_start_up_line():
    """Probe noise, then the interpreter's exit warnings: where the start had got is
    the last start-up line before the shutdown, not the warning's echoed source."""
    run = Run()
    run.log("[2026-07-28 09:40:00] server_args=ServerArgs(model_path='m', tp_size=8)\n"
            "[2026-07-28 09:47:23] Start of pd disaggregation warmup ...\n"
            '[2026-07-28 10:01:13] INFO:     10.245.158.91:53960 - "PRI %2A HTTP/2.0" 404 Not Found\n'
            "/usr/lib/python3.10/multiprocessing/resource_tracker.py:224: UserWarning: resource_tracker: There appear "
            "to be 8 leaked semaphore objects to clean up at shutdown\n"
            "  warnings.warn('resource_tracker: There appear to be %d '\n")
    v = run.finish()
    assert v.outcome == "incomplete"
    assert v.evidence == {"line": "[2026-07-28 09:47:23] Start of pd disaggregation warmup ...", "lineno": 2}
    run.log("[2026-07-28 10:02:00] Load weight begin. avail mem=59.60 GB\n")  # it went on after all
    assert run.finish().evidence["line"] == "[2026-07-28 10:02:00] Load weight begin. avail mem=59.60 GB"


@pytest.mark.parametrize("bar,lineno", [
    ("  0%|          | 0/36 [00:00<?, ?it/s]", 2),  # never moved: the phase line that began it
    (" 50%|█████     | 18/36 [00:09<00:09,  1.9it/s]", 3),  # it moved: the bar is where it got
])
def test_a_start_stuck_on_a_progress_bar_got_to_where_the_bar_says(bar, lineno):
    run = Run()
    run.log("[2026-06-07 18:50:40] server_args=ServerArgs(model_path='m', tp_size=2)\n"
            "[2026-06-07 18:51:06] Capture cuda graph begin. This can take up to several minutes. avail mem=65.31 GB\n"
            + bar + "\n")
    v = run.finish()
    assert v.outcome == "incomplete" and v.evidence["lineno"] == lineno


def test_a_progress_bar_that_began_its_own_phase_is_where_a_start_got():
    # vLLM's capture bar follows a compile phase line, not a capture one: the bar says more
    run = Run(server="vllm")
    bar = "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/6 [00:00<?, ?it/s]"
    wait = ("(EngineCore_DP0 pid=38) INFO 01-14 01:50:37 [shm_broadcast.py:542] No available shared memory "
            "broadcast block found in 60 seconds. This typically")
    run.log("(Worker_TP0 pid=48) INFO 01-14 01:49:24 [backends.py:278] Compiling a graph for compile range "
            "(1, 4096) takes 55.98 s\n" + bar + "\n" + wait + "\n happens when some processes are hanging or doing "
            "some time-consuming work (e.g. compilation, weight/kv cache quantization).\n")
    v = run.finish()
    assert v.outcome == "incomplete" and v.evidence["line"] == bar


def test_a_crash_after_ready_is_failed_with_how_long_it_had_been_ready():
    run = Run()
    run.log(VLLM_START + VLLM_READY, at=1)
    run.log("(EngineCore_DP0 pid=2) ERROR 11-01 12:31:40 [core.py:781] EngineCore encountered a fatal error.\n"
            "(EngineCore_DP0 pid=2) ERROR 11-01 12:31:40 [core.py:781] torch.AcceleratorError: CUDA error: "
            "device-side assert triggered\n", at=60)
    v = run.judge.finish(60)
    assert v.outcome == "failed" and v.phase == "serving"
    assert "ready (at line 2) 2 lines and 59 s before it failed" in v.notes[0]


def test_a_time_limit_before_ready_fails_the_start_and_after_ready_only_stops_it():
    limit = "slurmstepd: error: *** JOB 12 ON n1 CANCELLED AT 2026-12-01T02:40:11 DUE TO TIME LIMIT ***\n"
    loading = Run()
    loading.log(VLLM_START + limit, at=1)
    assert loading.finish().cause == "time_limit"
    served = Run()
    served.log(VLLM_START + VLLM_READY + limit, at=1)
    assert served.finish().outcome == "ready"


def test_a_job_cancelled_by_scancel_is_stopped_from_outside():
    cancel = ("slurmstepd: error: *** STEP 956247.1 ON n1 CANCELLED AT 2026-07-17T00:57:13 ***\n"
              "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
              "srun: error: n1: task 0: Killed\n")
    served = Run()
    served.log(VLLM_START + VLLM_READY + cancel, at=1)
    assert served.finish().outcome == "ready"
    loading = Run()
    loading.log(VLLM_START + cancel, at=1)
    assert loading.finish().outcome == "incomplete"


def test_oom_kills_slurm_counts_after_a_cancel_fail_the_start_they_ended():
    # slurmstepd counts the step's OOM kills as it ends: after the scancel that
    # ended a start the kills had already stalled
    cancel = "slurmstepd: error: *** JOB 44810128 ON cs003 CANCELLED AT 2024-03-29T14:58:45 ***\n"
    kills = ("slurmstepd: error: Detected 8 oom_kill events in StepId=44810128.batch. "
             "Some of the step tasks have been OOM Killed.\n")
    loading = Run()
    loading.log(VLLM_START + cancel + kills, at=1)
    v = loading.finish()
    assert (v.outcome, v.cause, v.evidence["line"]) == ("failed", "host_oom", kills.strip())
    served = Run()
    served.log(VLLM_START + VLLM_READY + cancel + kills, at=1)
    assert served.finish().outcome == "ready"


# -- lines listed as ignored (the verdict's benign list) ---------------------

def _ignored(verdict) -> list[str]:
    return [b["line"] for b in verdict.benign]


def test_errors_that_did_not_decide_the_verdict_are_listed_as_ignored():
    run = Run()
    run.log(VLLM_START
            + "Traceback (most recent call last):\n  File \"h.py\", line 1, in get\n"
            "TimeoutError: The read operation timed out\n"  # handled: start-up went on
            "WARNING 10-12 00:26:51 [x.py:1] ModuleNotFoundError: No module named 'torch'\n"  # a cause line, no failure
            + VLLM_READY
            + "ERROR 10-12 00:27:00 [serving_chat.py:203] ValueError: This model's maximum context length is 2048 tokens.\n"
            "(APIServer pid=1) KeyboardInterrupt: terminated\n")
    v = run.finish()
    assert v.outcome == "ready"
    ignored = _ignored(v)
    assert "Traceback (most recent call last):" in ignored
    assert "TimeoutError: The read operation timed out" in ignored
    assert any("No module named 'torch'" in line for line in ignored)
    assert any("maximum context length" in line for line in ignored)
    assert "(APIServer pid=1) KeyboardInterrupt: terminated" in ignored


def test_a_failure_lists_lines_naming_another_cause_but_not_its_own_copies():
    v = _failed("ImportError: /x/common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEab\n"
                "ModuleNotFoundError: No module named 'common_ops'\n"
                "[rank1]: ImportError: /x/common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEab\n")
    assert v.cause == "undefined_symbol"
    ignored = _ignored(v)
    assert "ModuleNotFoundError: No module named 'common_ops'" in ignored
    assert not any("undefined symbol" in line for line in ignored)


def test_a_warning_of_another_worker_inside_a_traceback_is_listed():
    v = _failed("(EngineCore pid=1) Traceback (most recent call last):\n"
                "(EngineCore pid=1)   File \"w.py\", line 1, in init\n"
                "[rank0]:[W1031 16:32:25.371256416 ProcessGroupNCCL.cpp:1538] Warning: WARNING: destroy_process_group() was not called\n"
                "(EngineCore pid=1) ValueError: Free memory on device (5.92/79.19 GiB) on startup is less than desired "
                "GPU memory utilization (0.9, 71.27 GiB).\n", server="vllm")
    assert v.cause == "cuda_oom"
    assert any("destroy_process_group" in line for line in _ignored(v))


def test_copies_of_a_warning_are_listed_once_but_other_messages_are_not_merged():
    run = Run(server="sglang")
    run.log("[2025-04-09 05:05:03] Ignore import error when loading sglang.srt.models.a: cannot import name 'X' from 'transformers'\n"
            "[2025-04-09 05:05:04] Ignore import error when loading sglang.srt.models.b: cannot import name 'X' from 'transformers'\n"
            "[2025-04-09 05:05:09] Ignore import error when loading sglang.srt.models.a: cannot import name 'X' from 'transformers'\n"
            "[2025-04-09 05:05:21] The server is fired up and ready to roll!\n")
    v = run.finish()
    assert [b["lineno"] for b in v.benign] == [1, 2]


def test_an_unambiguous_message_in_a_window_with_no_banner_names_its_cause():
    v = _failed("[rank0]: ValueError: The model's max seq len (32768) is larger than the "
                "maximum number of tokens that can be stored in KV cache (21104). Try increasing "
                "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n")
    assert v.cause == "kv_cache_too_small"
    v = _failed("[sgl_kernel] CRITICAL: Could not load any common_ops library!\n"
                "Error details from previous import attempts:\n"
                "- ModuleNotFoundError: No module named 'common_ops'\n"
                "- ImportError: /x/sgl_kernel/sm100/common_ops.abi3.so: undefined symbol: _ZNK3c106SymInt6sym_neERKS0_\n")
    assert v.cause == "undefined_symbol" and v.evidence["line"].startswith("- ImportError:")


def test_a_fatal_line_that_repeats_the_message_of_a_line_just_before_it_gives_way_to_that_first_copy():
    stub = ("I1129 08:28:33.928915 15088 pb_stub.cc:325] Failed to initialize Python stub: ValueError: "
            "The NVIDIA driver on your system is too old (found version 11040).")
    v = _failed(stub + "\nE1129 08:28:34.285773 15088 backend_model.cc:634] ERROR: Failed to create instance: "
                "ValueError: The NVIDIA driver on your system is too old (found version 11040).\n", server="trtllm")
    assert v.cause == "driver_mismatch" and v.evidence["line"] == stub


def test_a_fatal_line_opening_a_traceback_gives_the_evidence_to_its_exception():
    v = _failed("[2024-12-13 01:47:34] Initialization failed. warmup error: Traceback (most recent call last):\n"
                "  File \"server.py\", line 621, in _wait_and_warmup\n"
                "AssertionError: res=<Response [502]>, res.text=''\n", server="sglang")
    assert v.cause == "warmup_failed" and v.evidence["line"] == "AssertionError: res=<Response [502]>, res.text=''"
    v = _failed("[2024-12-13 01:47:34] Initialization failed. warmup error: Traceback (most recent call last):\n"
                "  File \"server.py\", line 621, in _wait_and_warmup\n"
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n", server="sglang")
    assert v.cause == "cuda_oom"  # a warm-up that ran out of memory: the memory is the cause
    # SGLang 0.3 logged its weights through vLLM's loader: vLLM's log format names the family
    # (weakly) before any SGLang line, and SGLang's own wording is still read
    v = _failed("INFO 11-26 14:23:34 weight_utils.py:243] Using model weights format ['*.safetensors']\n"
                "[2024-11-26 14:25:58] Initialization failed. warmup error: Traceback (most recent call last):\n")
    assert v.cause == "warmup_failed"


def test_an_exception_naming_no_cause_gives_way_to_the_cause_its_output_names():
    v = _failed("RuntimeError: ninja exited with status 1\n"
                "[1/2] c++ -shared x.o -o x.so\n/usr/bin/ld: cannot find -lcudart\n"
                "ninja: build stopped: subcommand failed.\n")
    assert v.cause == "compile_error" and v.evidence["line"] == "/usr/bin/ld: cannot find -lcudart"


def test_a_traceback_logged_as_a_warning_was_handled():
    v = _failed("(EngineCore pid=1) WARNING 06-23 15:43:18 [import_utils.py:408] Module deep_gemm was found but failed to import\n"
                "(EngineCore pid=1) WARNING 06-23 15:43:18 [import_utils.py:408] Traceback (most recent call last):\n"
                "(EngineCore pid=1) WARNING 06-23 15:43:18 [import_utils.py:408]   File \"d.py\", line 117, in _find_cuda_home\n"
                "(EngineCore pid=1) WARNING 06-23 15:43:18 [import_utils.py:408] AssertionError\n"
                "(EngineCore pid=1) ERROR 06-23 15:43:19 [core.py:1195] EngineCore failed to start.\n"
                "(EngineCore pid=1) ERROR 06-23 15:43:19 [core.py:1195] Traceback (most recent call last):\n"
                "(EngineCore pid=1) ERROR 06-23 15:43:19 [core.py:1195]   File \"f.py\", line 1, in build\n"
                "(EngineCore pid=1) ERROR 06-23 15:43:19 [core.py:1195] RuntimeError: Could not find nvcc and default "
                "cuda_home='/usr/local/cuda' doesn't exist\n", server="vllm")
    assert v.cause == "compile_error" and "Could not find nvcc" in v.evidence["line"]
    assert any(line.endswith("] AssertionError") for line in _ignored(v))


def test_a_window_that_starts_with_a_served_request_is_ready():
    run = Run()
    run.log('INFO:     172.22.0.4:42970 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
            "Traceback (most recent call last):\n  File \"vl.py\", line 150, in preprocess\n"
            "ValueError: unsupported modality image_url\n")
    v = run.finish()
    assert v.outcome == "ready" and "ValueError: unsupported modality image_url" in _ignored(v)


@pytest.mark.parametrize("up", [
    "INFO:     Application startup complete.",  # a vLLM whose logging config drops its own lines
    "(APIServer pid=1) INFO 05-04 23:56:38 [api_server.py:602] Starting vLLM server on http://0.0.0.0:8000",
])
def test_a_ready_proven_by_a_served_request_points_back_to_where_the_server_came_up(up):
    run = Run()
    run.log("Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:05<00:00,  2.81s/it]\n"
            f"{up}\nsome unrelated line\n"
            'INFO:     100.64.10.54:47584 - "GET /v1/models HTTP/1.1" 200 OK\n')
    v = run.finish()
    assert (v.outcome, v.evidence["line"]) == ("ready", up)


def test_a_served_request_with_no_line_saying_where_it_came_up_is_its_own_evidence():
    run = Run()
    served = 'INFO:     172.22.0.4:42970 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
    run.log(f"INFO:     Started server process [1]\n{served}\n")
    assert run.finish().evidence["line"] == served


def test_a_segmentation_fault_after_a_request_error_is_a_segfault():
    run = Run()
    run.log(VLLM_START + VLLM_READY + "AssertionError: The max KV cache length of input sequences (3646) exceeds the "
            "KV cache manager's maximum supported length (2049).\n"
            "[67d371949311:1722 :0:1777] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x0)\n")
    v = run.finish()
    assert v.outcome == "failed" and v.cause == "segfault" and "Caught signal 11" in v.evidence["line"]


TGI_SHARD_DIED = ('2024-05-01T10:00:00.000000Z  INFO text_generation_launcher: Args { model_id: "x" }\n'
                  "2024-05-01T10:00:01.000000Z  INFO shard-manager: text_generation_launcher: Starting shard rank=0\n"
                  "2024-05-01T10:00:09.000000Z ERROR shard-manager: text_generation_launcher: Shard process was "
                  "signaled to shutdown with signal 11 rank=0\n")
TGI_GAVE_UP = ("2024-05-01T10:00:09.000000Z ERROR text_generation_launcher: Shard 0 failed to start\n"
               "Error: ShardCannotStart\n")


@pytest.mark.parametrize("dump,cause,evidence", [
    ("", "segfault", "signal 11"),
    # the shard's own stderr says why it died: how it died gives way to that
    ("2024-05-01T10:00:09.000000Z ERROR shard-manager: text_generation_launcher: Shard complete standard error "
     "output:\n\nTraceback (most recent call last):\n  File \"/opt/conda/bin/text-generation-server\", line 8, "
     "in <module>\n    sys.exit(app())\nRuntimeError: CUDA error: an illegal memory access was encountered\n\n",
     "other", "RuntimeError: CUDA error"),
])
def test_a_tgi_shard_killed_by_a_crash_signal_is_a_segfault_unless_its_stderr_says_more(dump, cause, evidence):
    run = Run()
    run.log(TGI_SHARD_DIED + dump + TGI_GAVE_UP)
    v = run.finish()
    assert (v.outcome, v.cause) == ("failed", cause) and evidence in v.evidence["line"]


TRTLLM_BENCH_UP = ("[TensorRT-LLM] TensorRT-LLM version: 0.15.0\n"
                   "[12/03/2024-10:12:03] [TRT-LLM] [I] Initializing Executor.\n"
                   "[TensorRT-LLM][INFO] Loaded engine size: 15323 MiB\n"
                   "[12/03/2024-10:12:31] [TRT-LLM] [I] WAITING ON EXECUTOR...\n"
                   "[12/03/2024-10:12:31] [TRT-LLM] [I] Executor started.\n"
                   "[12/03/2024-10:12:31] [TRT-LLM] [I] Benchmark started.\n")


@pytest.mark.parametrize("text,outcome,cause", [
    # the run's answers: its report is printed only once every request was answered
    (TRTLLM_BENCH_UP + "[12/03/2024-10:13:10] [TRT-LLM] [I] \n\n=====\n= PERFORMANCE OVERVIEW \n=====\n"
     "Token Throughput (tokens/sec):\t16891.9057\n", "ready", None),
    # "Executor started." is no ready line: the benchmark's first forward pass can still fail
    (TRTLLM_BENCH_UP + "[TensorRT-LLM][ERROR] Encountered an error in forwardAsync function: [TensorRT-LLM][ERROR] "
     "CUDA runtime error in cudaMallocAsync(ptr, n, mCudaStream->get()): out of memory "
     "(/src/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:125)\n"
     "mpirun detected that one or more processes exited with non-zero status, thus causing\n", "failed", "cuda_oom"),
    # and the latency benchmark (0.14) prints it before the engine loads
    ("[TensorRT-LLM] TensorRT-LLM version: 0.14.0\n"
     "[11/02/2024-08:01:14] [TRT-LLM] [I] Starting Executor backend...\n"
     "[11/02/2024-08:01:14] [TRT-LLM] [I] Executor started.\n"
     "[11/02/2024-08:01:14] [TRT-LLM] [I] Initializing backend...\n"
     "[TensorRT-LLM][INFO] Loaded engine size: 15323 MiB\n", "incomplete", None),
])
def test_trtllm_bench_is_up_when_its_report_comes(text, outcome, cause):
    run = Run()
    run.log(text)
    v = run.finish()
    assert (v.outcome, v.cause) == (outcome, cause)


def test_jaxs_tpu_probe_on_a_gpu_host_names_no_cause():
    """JAX logs the backends it could not start (INFO) as it looks for one; a TPU that is
    not there says nothing of a GPU server's failure. Its own exception does."""
    probe = ("INFO 06-26 20:05:10 [xla_bridge.py:895] Unable to initialize backend 'tpu': FAILED_PRECONDITION: "
             "TPU initialization failed: No TPU devices found after filtering\n")
    run = Run()
    run.log(VLLM_START + probe + "ValueError: Unexpected shard id for lm_head.weight: 3\n")
    v = run.finish()
    assert (v.outcome, v.cause) == ("failed", "other")
    run = Run()
    run.log(VLLM_START + "jax.errors.JaxRuntimeError: FAILED_PRECONDITION: TPU initialization failed: "
            "No TPU devices found after filtering\n")
    assert run.finish().cause == "gpu_unavailable"


TRITON_LOADING = ("I1107 17:42:20.100000 1 server.cc:674] Starting Triton\n"
                  "[TensorRT-LLM][INFO] Loaded engine size: 14000 MiB\n")
DESERIALIZE_FAILED = ("[TensorRT-LLM][ERROR] Assertion failed: Failed to deserialize cuda engine. "
                      "(/src/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmRuntime.cpp:96)")
TRT_OOM = "[11/07/2025-17:42:27] [TRT] [E] [resizingAllocator.cpp::allocate::78] Error Code 1: Cuda Runtime (out of memory)"


@pytest.mark.parametrize("before,cause,evidence", [
    # TensorRT says why it could not load the engine: its allocator ran out of memory
    (TRT_OOM + "\n", "cuda_oom", TRT_OOM),
    # alone, an engine that does not deserialize was built by another TensorRT
    ("", "version_mismatch", DESERIALIZE_FAILED),
])
def test_an_engine_that_does_not_deserialize_takes_the_cause_tensorrt_gave(before, cause, evidence):
    run = Run()
    run.log(TRITON_LOADING + before + DESERIALIZE_FAILED + "\n"
            "error: creating server: Internal - failed to load all models\n")
    v = run.finish()
    assert (v.outcome, v.cause, v.evidence["line"]) == ("failed", cause, evidence)


LLAMACPP_TAIL = ("llama_kv_cache:      CUDA0 KV buffer size =   768.00 MiB\n"
                 "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 26474.02 MiB on device 0: "
                 "cudaMalloc failed: out of memory\n"
                 "graph_reserve: failed to allocate compute buffers\n")


RESERVE_OOM = ("0.14.953.955 E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9043.90 MiB on device 0: "
               "cudaMalloc failed: out of memory\n"
               "0.14.953.965 E ggml_gallocr_reserve_n_impl: failed to allocate CUDA0 buffer of size 9483211264\n"
               "0.14.953.967 E graph_reserve: failed to allocate compute buffers\n")
RETRY = "0.14.953.976 W sched_reserve: compute buffer allocation failed, retrying without pipeline parallelism\n"


@pytest.mark.parametrize("after,outcome,cause", [
    # llama.cpp fits the graph again without pipeline parallelism, and serves
    (RETRY + "0.16.963.374 I srv  llama_server: model loaded\n"
     "0.16.963.383 I srv  llama_server: server is listening on http://127.0.0.1:22162\n", "ready", None),
    # the retry did not fit either: the error it raises ends the start
    (RETRY + RESERVE_OOM + "0.15.000.000 E llama_init_from_model: failed to initialize the context: "
     "failed to allocate compute pp buffers\n", "failed", "cuda_oom"),
])
def test_a_compute_graph_that_did_not_fit_fails_only_when_the_retry_does(after, outcome, cause):
    run = Run()
    run.log("0.01.328.559 I srv  llama_server: loading model\n" + RESERVE_OOM + after)
    v = run.finish()
    assert (v.outcome, v.cause) == (outcome, cause)
    if outcome == "failed":
        assert v.evidence["line"] == RESERVE_OOM.split("\n")[0]


VLLM_UP = "(APIServer pid=1647) INFO:     Application startup complete.\n"
VLLM_LOADING = "(EngineCore_DP0 pid=1775) INFO 06-12 12:17:54 [gpu_model_runner.py:5096] Starting to load model m...\n"
DP_PORT_TAKEN = (
    "[W612 12:16:52.310912012 socket.cpp:767] [c10d] The server socket has failed to bind to [::]:40321 "
    "(errno: 98 - Address already in use).\n"
    "[E612 12:16:52.311050517 socket.cpp:801] [c10d] The server socket has failed to listen on any local network address.\n"
    "(EngineCore_DP0 pid=1775) WARNING 06-12 12:16:52 [parallel.py:746] Address already in use. Retrying with a new port.\n")


@pytest.mark.parametrize("said,after,outcome,cause", [
    # vLLM's data-parallel engine takes another port when torch's store could not bind its own
    (DP_PORT_TAKEN, VLLM_LOADING + VLLM_UP, "ready", None),
    (DP_PORT_TAKEN, VLLM_LOADING, "incomplete", None),
    # a best-effort cache write that failed, logged as a warning: start-up goes on
    ("(EngineCore pid=1775) WARNING 06-12 12:19:00 [startup_plan.py:191] Failed to save startup plan to "
     "/root/.cache/vllm/startup_plans/3f9c2a7d1e.json: [Errno 28] No space left on device\n", VLLM_UP, "ready", None),
    # the same words raised, not warned: the start fails
    ("OSError: [Errno 98] Address already in use\n", "", "failed", "port_in_use"),
])
def test_a_fatal_message_logged_as_a_warning_was_handled(said, after, outcome, cause):
    run = Run()
    run.log(VLLM_START + said + after)
    v = run.finish()
    assert (v.outcome, v.cause) == (outcome, cause)


@pytest.mark.parametrize("level", ["[RANK 0] [E] [Autotuner]: Failed when profiling <MoERunner object at 0x7f3c> 17, "
                                   "shapes=[torch.Size([8192, 7168])], Error occurred: [TensorRT-LLM][ERROR] Assertion "
                                   "failed: Error occurred when running GEMM!",
                                   "[W] [Autotuner] Failed when profiling runner=<MoERunner object at 0x7f3c>, tactic=17. "
                                   "Error: [TensorRT-LLM][ERROR] Assertion failed: Error occurred when running GEMM!"])
def test_trtllms_autotuner_skips_a_tactic_that_fails(level):
    run = Run()
    run.log("[TensorRT-LLM] TensorRT-LLM version: 1.2.0rc5\n"
            "[12/20/2025-04:21:10] [TRT-LLM] [I] [Autotuner] Autotuning process starts ...\n"
            f"[12/20/2025-04:21:12] [TRT-LLM] {level}\n"
            "[12/20/2025-04:21:37] [TRT-LLM] [I] [Autotuner] Autotuning process ends\n"
            "INFO:     Application startup complete.\n")
    assert run.finish().outcome == "ready"


@pytest.mark.parametrize("last,outcome", [
    # 0.5.16+: a KV pool smaller than the context is a warning, the start goes on
    ("[2026-12-05 10:00:44 TP0] KV pool holds 21504 tokens, fewer than --context-length 262144. One full-length "
     "request cannot fit, so long requests will be refused or truncated at serving time.", "incomplete"),
    # and its reworded retract line is a server at work
    ("[2026-12-05 11:20:04 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, "
     "#new_tokens_gained: 9216, #new_token_ratio: 0.4550 -> 0.5980", "ready"),
])
def test_sglangs_newer_kv_pool_lines(last, outcome):
    run = Run()
    run.log("[2026-12-05 10:00:00] server_args={'model_path': 'Qwen/Qwen3-30B-A3B', 'port': 30000}\n"
            "[2026-12-05 10:00:05 TP0] Load weight begin. avail mem=78.53 GB\n" + last + "\n")
    assert run.finish().outcome == outcome


LLAMACPP_RUN = "0.00.000.402 I cmn  common_param: common_params_print_info: verbosity = 3 (adjust with the `-lv N` CLI arg)\n"


def test_a_llamacpp_restart_at_default_verbosity_is_a_new_run():
    """Since mid-2026 llama-server's default verbosity hides its build and system_info
    lines: the verbosity notice is what each run prints first."""
    run = Run()
    run.log(LLAMACPP_RUN + "0.00.001.021 I srv    load_model: loading model 'm'\n"
            "0.02.240.120 E llama_model_load: error loading model: unable to allocate CUDA0 buffer\n"
            "0.02.240.700 E srv  llama_server: exiting due to model loading error\n"
            + LLAMACPP_RUN + "0.00.118.552 I srv    load_model: loading model 'm'\n"
            "0.03.402.140 I srv  llama_server: listening on http://127.0.0.1:8080\n")
    assert run.finish().outcome == "ready"


LMDEPLOY_TRITON_CHECK = "2026-10-05 10:00:02,101 - lmdeploy - ERROR - base.py:55 - <Triton> check failed!\n"


@pytest.mark.parametrize("under,cause", [
    # the check says which Triton it needs
    ("triton>=3.4.0 is required. Found triton==3.3.1\n", "version_mismatch"),
    # its test kernel did not compile, and the lines under it say nothing a rule reads
    ("Traceback (most recent call last):\n  File \"/opt/py/triton/compiler/compiler.py\", line 9, in compile\n"
     "    raise CompilationError(src)\nCompilationError: at 1:0\n", "compile_error"),
])
def test_lmdeploys_triton_check_takes_the_reason_printed_under_it(under, cause):
    run = Run()
    run.log("$ lmdeploy serve api_server Qwen/Qwen3-8B --backend pytorch\n" + LMDEPLOY_TRITON_CHECK + under)
    v = run.finish()
    assert (v.outcome, v.cause) == ("failed", cause)


TGI_ARGS = '2025-12-19T10:00:00.000000Z  INFO text_generation_launcher: Args { model_id: "m", port: 80 }\n'


@pytest.mark.parametrize("order", ["router first", "launcher first"])
def test_a_shard_that_crashed_in_warm_up_is_the_cause_whichever_thread_wrote_first(order):
    """The router's "transport error" says only that the shard went away."""
    router = 'Error: Backend(Warmup(Generation("transport error")))\n'
    launcher = ("2025-12-19T10:00:21.300100Z ERROR shard-manager: text_generation_launcher: Shard process was "
                "signaled to shutdown with signal 11 rank=0\n")
    run = Run()
    run.log(TGI_ARGS + (router + launcher if order == "router first" else launcher + router))
    v = run.finish()
    assert (v.outcome, v.cause) == ("failed", "segfault")


def test_a_crash_while_serving_takes_no_cause_from_an_allocation_retried_at_start():
    run = Run()
    run.log("0.00.001.021 I srv    load_model: loading model 'm'\n" + RESERVE_OOM + RETRY
            + "0.06.000.100 I srv  llama_server: server is listening on http://0.0.0.0:8080\n"
            "0.20.000.000 I slot launch_slot_: id  0 | task 0 | processing task\n"
            "Segmentation fault (core dumped)\n")
    v = run.finish()
    assert (v.outcome, v.cause) == ("failed", "segfault")


SHELL_SEGFAULT = 'bash: line 1: 308206 Segmentation fault      (core dumped) nohup ./build/bin/llama-server -m m.gguf'


@pytest.mark.parametrize("fault,cause,evidence", [
    # bash reports the death once it is over; the wrapper then prints the log's tail
    (SHELL_SEGFAULT, "cuda_oom", LLAMACPP_TAIL.split("\n")[1]),
    # a bare report (the process's own, or a terminal's): what follows is not known to be that process's
    ("Segmentation fault (core dumped)", "segfault", "Segmentation fault (core dumped)"),
])
def test_a_shells_report_of_a_crash_takes_the_cause_the_tail_under_it_names(fault, cause, evidence):
    run = Run()
    run.log("main: build = 8198 (abc1234)\n" + fault + "\n" + LLAMACPP_TAIL)
    v = run.finish()
    assert (v.outcome, v.cause, v.evidence["line"]) == ("failed", cause, evidence)


@pytest.mark.parametrize("text,server", [
    ("[transformers] The tokenizer you are loading from '/m' with an incorrect regex pattern: https://x\n"
     "[TM][WARN][0912.11:44:07.043272][nccl.cu:81] Window registration may cause memory leaks in NCCL 2.27\n"
     "INFO:     Uvicorn running on http://0.0.0.0:17891 (Press CTRL+C to quit)\n", "lmdeploy"),
    ("INFO 02-17 02:35:21 __init__.py:190] Automatically detected platform cuda.\n"
     "[2025-02-17 02:35:25] server_args=ServerArgs(model_path='m', tp_size=1)\n"
     "[2025-02-17 02:35:40] The server is fired up and ready to roll!\n", "sglang"),
    ("INFO 02-17 02:35:21 __init__.py:190] Automatically detected platform cuda.\n"
     "INFO:     Application startup complete.\n", "vllm"),
])
def test_a_line_other_servers_print_too_names_the_family_only_until_another_shows(text, server):
    run = Run()
    run.log(text)
    v = run.finish()
    assert v.server == server and v.outcome == "ready"


@pytest.mark.parametrize("text,server", [
    # FlashInfer's JIT build of its vendored TensorRT-LLM kernels (a path under nv_internal/,
    # the C++ namespace in nvcc's error) names no TensorRT-LLM server
    ('/venv/lib/python3.12/site-packages/flashinfer/data/csrc/nv_internal/tensorrt_llm/kernels/x.generated.cu(15): '
     'error: incomplete type "cutlass::gemm::kernel::GemmUniversal<tensorrt_llm::TmaWarpSpecializedGroupedGemmInput>"\n', None),
    ('  File "/usr/local/lib/python3.12/dist-packages/tensorrt_llm/llmapi/llm.py", line 1, in <module>\n', "trtllm"),
])
def test_a_detect_pattern_is_read_with_its_lookarounds(text, server):
    """The prefilter finds candidates without lookarounds; the detect pattern itself decides."""
    run = Run()
    run.log(text)
    assert run.finish().server == server


def _diagnosed(text):
    import io

    from firedup import diagnose
    return diagnose(io.BytesIO(text.encode()))


def test_a_restart_stopped_before_it_got_anywhere_leaves_the_earlier_runs_failure():
    kv = ("ValueError: To serve at least one request with the model's max seq len (98304), (1.06 GiB KV cache is "
          "needed, which is larger than the available KV cache memory (0.47 GiB).\n")
    restart = VLLM_START + "INFO 10-12 00:27:03 config.py:1] Using max model len 98304\n"
    stop = "Traceback (most recent call last):\n  File \"api_server.py\", line 564, in signal_handler\n" \
           "KeyboardInterrupt: terminated\n"
    v = _diagnosed(VLLM_START + "Traceback (most recent call last):\n  File \"gpu_worker.py\", line 1, in x\n" + kv
                   + restart + stop)
    assert (v.outcome, v.cause) == ("failed", "kv_cache_too_small") and v.evidence["lineno"] == 4
    assert any("started again at line 5" in note and "was stopped" in note for note in v.notes)
    # runs that each failed the same way (a restart loop; what they measured differs) are the first's failure
    loop = _diagnosed(VLLM_START + "Traceback (most recent call last):\n" + kv + restart + "Traceback (most recent "
                      "call last):\n" + kv.replace("0.47", "0.61") + restart + stop)
    assert loop.cause == "kv_cache_too_small" and loop.evidence["lineno"] == 3
    assert any("holds 2 runs" in note for note in loop.notes)
    # a restart that came up is what the log ends on
    assert _diagnosed(VLLM_START + "Traceback (most recent call last):\n" + kv + restart
                      + "INFO:     Application startup complete.\n").outcome == "ready"


TF_RUN = ("[transformers] Loading /m/tiny-llama\n[transformers] loading weights file /m/tiny-llama/model.safetensors\n"
          "INFO:     Started server process [5273]\nINFO:     Application startup complete.\n"
          "INFO:     Uvicorn running on http://127.0.0.1:18409 (Press CTRL+C to quit)\n")
TF_DOWN = ("INFO:     Shutting down\nINFO:     Waiting for application shutdown.\n"
           "INFO:     Application shutdown complete.\nINFO:     Finished server process [5273]\n")
TF_TRUNCATED = ("[transformers] Loading /m/model-trunc\nTraceback (most recent call last):\n"
                "  File \"safetensors/torch.py\", line 1, in load_file\n"
                "safetensors._safetensors_rust.SafetensorError: Error while deserializing header: invalid header length\n")


def test_a_restart_appended_after_a_ready_run_ended_is_judged_on_its_own():
    # transformers serve started again with ">> log" after a run that came up and was stopped
    v = _diagnosed(TF_RUN + TF_DOWN + TF_TRUNCATED)
    assert (v.outcome, v.cause) == ("failed", "corrupt_checkpoint") and v.evidence["lineno"] == 13
    # watched live with the new process known: the old run's ready is not this one's
    run = Run(stall=300)
    assert run.log(TF_RUN + TF_DOWN, at=0.1) is None
    v = run.log(TF_TRUNCATED, at=2) or run.exit(1, at=3)
    assert (v.outcome, v.cause) == ("failed", "corrupt_checkpoint")
    # the same log with no process known (a finished log) still reads as the run that came up
    assert Run(quiet=2.0).log(TF_RUN + TF_DOWN, at=0.1).outcome == "ready"
    # a model loaded at the first request for it, while serving, is no restart
    assert _diagnosed(TF_RUN + "[transformers] Loading /m/other\n").outcome == "ready"


TF_BAD_FLAG = ("Usage: transformers serve [OPTIONS] [FORCE_MODEL]\nTry 'transformers serve --help' for help.\n\n"
               "Error: No such option '--no-such-flag'.\n\nAvailable options for 'transformers serve':\n"
               "  --log-level TEXT               Logging level (e.g. 'info', 'warning').  [default: warning]\n")


@pytest.mark.parametrize("before", [TF_TRUNCATED, TF_RUN + TF_DOWN], ids=["after a failed run", "after a stopped run"])
def test_a_rejected_flag_appended_after_an_earlier_run_is_that_runs_own_failure(before):
    # the usage text that comes before the error is where the new process began: no banner comes first
    v = _diagnosed(before + TF_BAD_FLAG)
    assert (v.outcome, v.cause, v.phase, v.notes) == ("failed", "bad_argument", "init", [])
    assert [b["rule"] for b in v.benign if b["lineno"] == before.count("\n") + 7] == ["cli-option-help"]
    run = Run(stall=300)
    run.log(before, at=0.1)
    v = run.log(TF_BAD_FLAG, at=5) or run.exit(2, at=5.1)
    assert (v.outcome, v.cause) == ("failed", "bad_argument")


def test_a_llama_server_restart_appended_after_its_ready_run_exited_is_judged_on_its_own():
    build = "build: 6134 (3bc8bcf0) with cc (Ubuntu 13.3.0) 13.3.0 for x86_64-linux-gnu\n"
    up = ("0.05.273.428 I srv  llama_server: model loaded\n"
          "0.05.273.433 I srv  llama_server: listening on http://127.0.0.1:8300\n"
          "0.09.975.154 I srv    operator(): operator(): cleaning up before exit...\n")
    failing = build + "gguf_init_from_file: failed to open GGUF file '/m/missing.gguf'\n"
    run = Run(stall=300)
    assert run.log(build + up, at=0.1) is None  # that run is over: the process writing now is another
    v = run.log(failing, at=2) or run.exit(1, at=3)
    assert (v.outcome, v.cause) == ("failed", "model_not_found")
    assert Run(quiet=2.0).log(build + up, at=0.1).outcome == "ready"  # no process known: the log's run


def test_a_restart_loop_watched_live_is_the_first_runs_failure_as_diagnose_says():
    # a restart policy's three tries, read at once by a live watch (the backlog): as diagnose reads them
    tries = "usage: vllm [-h] [-v]\nvllm: error: unrecognized arguments: org/model\n" * 3
    run = Run(stall=300)
    v = run.log(tries, at=1) or run.idle(2) or run.judge.decide(3)
    assert (v.outcome, v.cause, v.evidence["lineno"]) == ("failed", "bad_argument", 2)
    assert _diagnosed(tries).evidence["lineno"] == 2 and "3 runs" in v.notes[0]


def test_a_restarts_configuration_is_its_own_not_the_earlier_runs():
    args = "(APIServer pid=1) INFO 04-25 08:50:39 [utils.py:233] non-default args: {{'model_tag': 'm', {}}}\n"
    first = VLLM_START + args.format("'dtype': 'float16'") + "vllm serve: error: unrecognized arguments: --bogus\n"
    v = _diagnosed(first + VLLM_START + args.format("'port': 8001") + VLLM_READY)
    assert v.outcome == "ready" and v.config.get("port") == 8001 and "dtype" not in v.config


def test_a_child_ended_by_a_signal_before_ready_is_the_parent_failing_not_a_stop():
    log = (VLLM_START + "ERROR 11-20 08:34:06 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 118 died, exit code: -15\n"
           "Traceback (most recent call last):\n  File \"worker.py\", line 445, in raise_if_cache_size_invalid\n"
           "ValueError: The model's max seq len (131072) is larger than the maximum number of tokens that can be stored "
           "in KV cache (23968).\n")
    v = _diagnosed(log)
    assert (v.outcome, v.cause) == ("failed", "kv_cache_too_small")


def test_a_child_ended_by_a_signal_long_after_ready_is_a_stop():
    # past the 200 benign lines after which the engine stops reading benign rules
    served = "huggingface/tokenizers: The current process just got forked, after parallelism has already been used.\n" * 300
    log = (VLLM_START + VLLM_READY + served
           + "[2025-05-22 20:31:24] Child process unexpectedly failed with an exit code 9. pid=3905457\n"
           + "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\nRuntimeError: boom\n")
    v = _diagnosed(log)
    assert v.outcome == "ready"
    assert any("exit code 9" in b["line"] for b in v.benign)  # read (no other rule tags it), as the stop it is


# -- last words: a log that ends on error lines no rule knows -----------------

LLAMA_LOADING = "llama_model_loader: loaded meta data with 30 key-value pairs and 291 tensors from /m.gguf\n"
UNKNOWN_ERROR = "hsa api call failure at: /src/ROCR-Runtime/src/core/runtime/amd_gpu_agent.cpp:1300\n"


def test_a_finished_log_that_ends_on_an_unknown_error_failed_of_it():
    run = Run()
    run.log(LLAMA_LOADING + UNKNOWN_ERROR)
    v = run.finish()
    assert (v.outcome.value, v.cause, v.evidence["line"]) == ("failed", "other", UNKNOWN_ERROR.strip())


def test_an_unknown_error_the_server_went_on_after_is_not_last_words():
    run = Run()
    run.log(LLAMA_LOADING + UNKNOWN_ERROR + "INFO 01-01 00:00:01 [x.py:1] Loading weights took 3.2 s\n")
    assert run.finish().outcome.value == "incomplete"


@pytest.mark.parametrize("warning", [
    "[WARNING] gemm_config.in is not found; using default GEMM algo",
    "WARNING 01-01 00:00:01 [x.py:1] Unable to find the kernel cache, building it",
    "2026-06-07 18:51:07,171 - CUTE_DSL - WARNING - Unexpected error during package walk: x",
])
def test_a_log_that_ends_on_a_warning_is_incomplete(warning):
    run = Run()
    run.log(LLAMA_LOADING + warning + "\n")
    assert run.finish().outcome.value == "incomplete"


def test_a_second_handlers_copy_of_a_warning_is_not_last_words():
    run = Run()
    run.log(LLAMA_LOADING + "2026-06-07 18:51:07,171 - CUTE_DSL - WARNING - Unexpected error during package walk: x\n"
            "[2026-06-07 18:51:07] Unexpected error during package walk: x\n")
    assert run.finish().outcome.value == "incomplete"


def test_a_cause_line_among_the_last_words_names_the_cause():
    run = Run()
    run.log(LLAMA_LOADING + "[TM][ERROR] CUDA runtime error: out of memory /lmdeploy/src/turbomind/core/allocator.cc:49\n")
    v = run.finish()
    assert (v.outcome.value, v.cause) == ("failed", "cuda_oom")


def test_a_log_watched_alone_that_goes_silent_on_an_unknown_error_fails_at_the_stall_window():
    run = Run(stall=300)
    run.log(LLAMA_LOADING + UNKNOWN_ERROR, at=0)
    assert run.idle(2) is None  # it may go on yet
    assert run.judge.decide(299) is None
    v = run.judge.decide(300)
    assert (v.outcome.value, v.cause, v.evidence["line"]) == ("failed", "other", UNKNOWN_ERROR.strip())


def test_lines_after_the_silence_take_the_last_words_back():
    run = Run(stall=300)
    run.log(LLAMA_LOADING + UNKNOWN_ERROR, at=0)
    run.idle(2)
    run.log("llama_model_loader: - kv   0:   general.architecture str = llama\n", at=10)
    assert run.judge.decide(310).outcome.value == "stalled"


def test_a_crash_glued_to_a_progress_bar_is_read():
    run = Run(server="sglang")
    line = ("Capturing batches (avail_mem=8.88 GB):  30%|██▊      | 7/23 [00:56<00:51,  3.20s/it]"
            "[A100-GPU-50:345  :0:4945] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x17)")
    run.log(line + "\n")
    v = run.finish()
    assert (v.outcome, v.cause, v.evidence["line"]) == ("failed", "segfault", line)


def test_vllms_engine_dying_after_ready_is_a_crash_while_serving():
    run = Run()
    run.log(VLLM_START + VLLM_READY + "(APIServer pid=2) ERROR 08-05 10:06:34 [async_llm.py:704] "
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
            "See stack trace (above) for the root cause.\n", at=1)
    v = run.finish()
    assert (v.outcome, v.cause) == ("failed", "worker_died") and "before it failed" in v.notes[0]


def test_a_crash_read_while_another_workers_traceback_is_open_is_judged_with_it():
    a = "(RayWorkerWrapper pid=4139) ERROR 07-03 14:43:50 worker_base.py:148] "
    first = a + "RuntimeError: NCCL error: internal error - please report this issue to the NCCL developers"
    run = Run(server="vllm")
    v = run.log(a + "Traceback (most recent call last):\n" + a + '  File "x.py", line 1, in init\n' + first + "\n"
                "(RayWorkerWrapper pid=10387) ERROR 07-03 14:43:50 worker_base.py:148] RuntimeError: NCCL error: "
                "remote process exited or there was a network error\n"
                "(RayWorkerWrapper pid=9821) Fatal Python error: Segmentation fault\n", at=1)
    assert (v.outcome, v.cause, v.evidence["line"]) == ("failed", "nccl", first)


@pytest.mark.parametrize("tid", ["140147414781952", "0x1fd44a080"])  # Linux, macOS
def test_a_llamacpp_window_in_its_2024_text_format_names_the_family_and_its_ready_line(tid):
    v = _diagnosed(f'INFO [                    main] model loaded | tid="{tid}" timestamp=1751293931\n'
                   f'INFO [                    main] HTTP server listening | tid="{tid}" timestamp=1751293931 '
                   'n_threads_http="31" port="8080" hostname="127.0.0.1"\n')
    assert (v.server, v.outcome) == ("llamacpp", "ready") and v.evidence["lineno"] == 2


GGML_STACK = "".join(f"./llama-server(+0x{0x33bcc + i:x})[0x62c8fd587bcc]\n" for i in range(30))


def test_ggmls_stack_printed_before_terminate_gives_way_to_the_exceptions_message():
    # ggml's terminate handler prints the stack first, then the C++ runtime says what was thrown
    run = Run(server="llamacpp")
    run.log("srv  params_from_: Chat format: DeepSeek R1\n"
            "/b/libggml-base.so(+0x158fb)[0x7f51338028fb]\n"
            "/b/libggml-base.so(ggml_print_backtrace+0x21c)[0x7f5133802d5c]\n" + GGML_STACK
            + "terminate called after throwing an instance of 'std::runtime_error'\n"
            "  what():  Invalid diff: now finding less tool calls!\n"
            "Aborted (core dumped)\n", at=1)
    v = run.finish()
    assert (v.outcome, v.cause) == ("failed", "other")
    assert v.evidence["line"] == "  what():  Invalid diff: now finding less tool calls!"


def test_ggmls_stack_alone_is_an_abort():
    # GGML_ABORT's message lost from the paste: the stack still says the process aborted
    run = Run(server="llamacpp")
    run.log("slot update_slots: id  2 | task 1950 | n_past = 75, slot.prompt.tokens.size() = 821, seq_id = 2, "
            "pos_min = -1\n"
            "libggml-base.so(ggml_print_backtrace+0x21f)[0x72edb99cd82f]\n"
            "libggml-base.so(ggml_abort+0x152)[0x72edb99cda02]\n" + GGML_STACK, at=1)
    v = run.finish()
    assert (v.outcome, v.cause) == ("failed", "segfault")


def test_a_window_of_requests_refused_as_the_clients_mistake_is_a_server_that_answers():
    run = Run()
    run.log('INFO:     127.0.0.1:55504 - "GET / HTTP/1.1" 404 Not Found\n'
            "INFO 07-07 20:12:44 metrics.py:295] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
            "0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%\n"
            'INFO:     127.0.0.1:53798 - "POST /generate HTTP/1.1" 404 Not Found\n', at=1)
    assert run.finish().outcome == "ready"


def test_vllms_api_server_finding_its_engine_process_gone_is_the_first_word_of_its_death():
    run = Run()
    run.log("ERROR 02-07 02:51:31 client.py:300] RuntimeError('Engine process (pid 20) died.')\n"
            "ERROR 02-07 02:51:31 client.py:300] NoneType: None\n"
            "ERROR 02-07 02:51:34 serving_chat.py:661] vllm.engine.multiprocessing.MQEngineDeadError: Engine loop is "
            "not running. Inspect the stacktrace to find the original error: RuntimeError('Engine process (pid 20) "
            "died.').\n"
            "CRITICAL 02-07 02:51:34 launcher.py:101] MQLLMEngine is already dead, terminating server process\n", at=1)
    v = run.finish()
    assert (v.outcome, v.cause, v.evidence["lineno"]) == ("failed", "worker_died", 1)


def test_a_traceback_quoted_in_an_exception_behind_a_prefix_ends_the_one_before_it():
    # Ray Serve's status quotes a replica's traceback, whose exception quotes another; behind compose's prefix
    window = "".join(f"vllm-1  | {line}\n" for line in [
        "          ray::ServeReplica:q:VLLMDeployment.initialize_and_get_metadata() (pid=1535, ip=10.191.48.218)",
        '            File "/usr/lib/python3.10/concurrent/futures/_base.py", line 451, in result',
        "              return self.__get_result()",
        "          RuntimeError: Traceback (most recent call last):",
        '            File "/v/vllm/worker/worker.py", line 9, in init_device',
        "              torch._C._cuda_init()",
        "          RuntimeError: No CUDA GPUs are available",
    ])
    v = _window(window)
    assert (v.outcome, v.cause) == ("failed", "gpu_unavailable")
    assert v.evidence["line"].endswith("RuntimeError: No CUDA GPUs are available")


def test_a_library_missing_for_an_optional_import_warned_about_explains_no_crash():
    # vllm-ascend warns that vllm._C cannot load (libcudart on an NPU host) and goes on; the engine
    # dies later on an NPU error whose own report, under it, names the cause
    err = "(EngineCore_DP0 pid=6903) ERROR 10-09 01:31:16 [core.py:718] "
    run = Run(server="vllm")
    run.log("WARNING 10-09 01:30:00 [_custom_ops.py:20] Failed to import from vllm._C with "
            "ImportError('libcudart.so.12: cannot open shared object file: No such file or directory')\n"
            "INFO 10-09 01:30:05 [gpu_model_runner.py:1329] Starting to load model m...\n"
            + err + "RuntimeError: npuSynchronizeDevice:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:508 "
                    "NPU function error: AclrtSynchronizeDeviceWithTimeout, error code is 507013\n"
            + err + "[ERROR] 2025-10-09-01:31:16 (PID:6903, Device:0, RankID:-1) ERR00100 PTA call acl api failed\n"
            + err + "EL0004: [PID: 6903] 2025-10-09-01:31:15.131.349 Failed to allocate memory.\n")
    v = run.finish()
    assert v.outcome == "failed" and v.cause == "cuda_oom" and "EL0004" in v.evidence["line"], v


def test_a_name_that_could_not_be_imported_is_not_what_a_root_must_name():
    # "cannot import name 'NameSpace' from 'optional_ext'", warned about: the module is optional_ext, so a root
    # that merely says "name" does not make the warning its cause
    v = _failed("WARNING 10-09 01:30:00 [x.py:20] Failed to load: ImportError: cannot import name 'NameSpace' from "
                "'optional_ext' (libfoo.so: cannot open shared object file: No such file or directory)\n"
                "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
                "NameError: name 'model' is not defined\n", server="vllm")
    assert v.cause != "missing_shared_lib", v
