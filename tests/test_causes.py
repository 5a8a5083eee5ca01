"""Each cause slug of docs/contract.md, named from a realistic failing log."""

import io

import pytest

from firedup import diagnose
from firedup.rules import CAUSES


def tb(exception: str, prefix: str = "") -> str:
    return "".join(prefix + line + "\n" for line in (
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/site-packages/server/main.py", line 10, in main',
        "    start()",
        exception,
    ))


VLLM = "INFO 10-01 22:24:54 [api_server.py:1896] vLLM API server version 0.10.2\n"
SGLANG = "[2025-04-09 05:05:03] server_args=ServerArgs(model_path='m', tp_size=8)\n"

CASES = {
    "cuda_oom": SGLANG + tb("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 37.06 MiB is free.", "[2025-04-09 05:05:13 TP0] "),
    "host_oom": VLLM + "Loading safetensors checkpoint shards:  50% Completed | 32/64 [01:10<01:10, 2.2s/it]\nKilled\n",
    "kv_cache_too_small": VLLM + tb("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (21104). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", "(EngineCore_DP0 pid=7) ERROR 10-01 22:25:02 [core.py:718] "),
    "cudnn_version": tb("RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (9, 8, 0) but found runtime version (9, 6, 0)."),
    "arch_unsupported": tb("RuntimeError: CUDA error: no kernel image is available for execution on the device"),
    "driver_mismatch": tb("RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver."),
    "gpu_unavailable": tb("RuntimeError: No CUDA GPUs are available"),
    "undefined_symbol": tb("ImportError: /venv/lib/python3.12/site-packages/sgl_kernel/common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEab"),
    "version_mismatch": tb("RuntimeError: operator torchvision::nms does not exist"),
    "missing_shared_lib": tb("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"),
    "missing_module": tb("ModuleNotFoundError: No module named 'sgl_kernel'"),
    "nccl": tb("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5", "[rank1]: "),
    "port_in_use": "INFO:     Started server process [593]\nERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use\n",
    "model_not_found": tb("OSError: /models/llama does not appear to have a file named config.json. Checkout 'https://huggingface.co//models/llama/tree/main' for available files."),
    "corrupt_checkpoint": tb("safetensors._safetensors_rust.SafetensorError: Error while deserializing header: invalid header length", "(Worker pid=12092) ERROR 11-29 10:07:18 [multiproc_executor.py:953] "),
    "trust_remote_code": tb("ValueError: Loading /models/phi3 requires you to execute the configuration file in that repo on your local machine. Make sure you have read the code there to avoid malicious use, then set the option `trust_remote_code=True` to remove this error."),
    "unsupported_arch": tb("ValueError: Model architectures ['FooForCausalLM'] are not supported for now. Supported architectures: dict_keys(['LlamaForCausalLM'])"),
    "bad_argument": "usage: api_server.py [-h] [--host HOST]\napi_server.py: error: argument --dtype: invalid choice: 'fp7' (choose from 'auto', 'half')\n",
    "compile_error": "/tmp/tmpx/main.c:5:10: fatal error: Python.h: No such file or directory\ncompilation terminated.\n" + tb("subprocess.CalledProcessError: Command '['/usr/bin/gcc', '/tmp/tmpx/main.c']' returned non-zero exit status 1."),
    "worker_died": VLLM + tb("Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.", "(EngineCore pid=3) ERROR 06-03 12:30:47 [core.py:1165] "),
    "segfault": VLLM + "Fatal Python error: Segmentation fault\n\nThread 0x00007f (most recent call first):\n  File \"x.py\", line 1 in run\n",
    "warmup_failed": SGLANG + "[2025-04-09 05:05:20] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)\n"
                     "[2025-04-09 05:05:21] Initialization failed. warmup error: Traceback (most recent call last):\n"
                     '  File "http_server.py", line 1, in _wait_and_warmup\nAssertionError: {"object":"error","message":"boom"}\n',
    "time_limit": VLLM + "Loading safetensors checkpoint shards:  75% Completed | 48/64 [09:58<03:19, 12.5s/it]\n"
                  "slurmstepd: error: *** JOB 12 ON n1 CANCELLED AT 2026-12-01T02:40:11 DUE TO TIME LIMIT ***\n",
    "node_failure": VLLM + "slurmstepd: error: *** JOB 31 ON n1 CANCELLED AT 2026-12-01T03:02:11 DUE TO NODE FAILURE, "
                    "SEE SLURMCTLD LOG ***\n",
    "scheduler_rejected": "sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
    "other": tb("ValueError: something nobody has seen before"),
}


def test_every_cause_has_a_case():
    assert set(CASES) == set(CAUSES)


@pytest.mark.parametrize("cause", sorted(CASES))
def test_cause(cause):
    verdict = diagnose(io.BytesIO(CASES[cause].encode()))
    assert verdict.outcome == "failed"
    assert verdict.cause == cause
    assert verdict.explanation and verdict.remedy
    assert verdict.evidence["line"] in CASES[cause]


def raised_in(path: str, exception: str) -> str:
    return VLLM + "".join(line + "\n" for line in (
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/site-packages/vllm/entrypoints/openai/api_server.py", line 1, in run_server',
        "    engine_args.create_engine_config()",
        f'  File "/usr/lib/python3.12/site-packages/{path}", line 612, in __post_init__',
        "    raise ValueError(msg)",
        exception,
    ))


@pytest.mark.parametrize("path,cause", [
    ("vllm/config/model.py", "bad_argument"),  # the configuration check raised it
    ("vllm/engine/arg_utils.py", "bad_argument"),
    ("uvicorn/config.py", "bad_argument"),  # the HTTP server's options (host, port, log level)
    ("vllm/model_executor/models/llama.py", "other"),  # the same words from a model's code name no cause
])
def test_an_exception_names_its_cause_by_where_it_was_raised(path, cause):
    verdict = diagnose(io.BytesIO(raised_in(path, "ValueError: `max_model_len` is 0").encode()))
    assert (verdict.outcome, verdict.cause) == ("failed", cause)
    assert verdict.evidence["line"] == "ValueError: `max_model_len` is 0"


def test_a_kernel_that_failed_to_launch_is_not_a_compile_error():
    """Triton's backend driver runs a kernel already built: an error there is the launch's."""
    error = "RuntimeError: Triton Error [HIP]:  Code: 1, Messsage: invalid argument"
    built = raised_in("triton/backends/amd/compiler.py", error)
    launched = built.replace("amd/compiler.py\", line 612, in __post_init__", "amd/driver.py\", line 477, in __call__")
    assert launched != built
    assert diagnose(io.BytesIO(built.encode())).cause == "compile_error"
    assert diagnose(io.BytesIO(launched.encode())).cause == "other"


def test_where_it_was_raised_gives_way_to_what_the_message_says():
    log = raised_in("vllm/config/model.py", "ValueError: No available memory for the cache blocks.")
    assert diagnose(io.BytesIO(log.encode())).cause == "cuda_oom"


def test_a_validation_summary_gives_the_cause_to_the_field_it_refused():
    summary = "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig"
    refused = "  Value error, Invalid repository ID or local directory specified: '/models/nope'."
    verdict = diagnose(io.BytesIO(tb(summary).encode() + (refused + "\n").encode()))
    assert (verdict.cause, verdict.evidence["line"]) == ("model_not_found", refused)
    # a field's error no rule reads: the summary's cause, the field's line (it says why)
    verdict = diagnose(io.BytesIO(tb(summary).encode() + b"  Value error, something new [type=value_error]\n"))
    assert (verdict.cause, verdict.evidence["line"]) == ("bad_argument", "  Value error, something new [type=value_error]")


@pytest.mark.parametrize("what,cause", [
    ("  what():  [TM][ERROR] pointer_mapping_ does not have information of ptr at 0x1a9a0c2800.", "other"),
    ("  what():  [TM][ERROR] CUDA runtime error: out of memory /opt/lmdeploy/src/turbomind/utils/allocator.h:246", "cuda_oom"),
])
def test_an_uncaught_cpp_exception_is_told_by_its_message(what, cause):
    log = ("[WARNING] gemm_config.in is not found; using default GEMM algo\n"
           "terminate called after throwing an instance of 'std::runtime_error'\n" + what + "\nAborted (core dumped)\n")
    verdict = diagnose(io.BytesIO(log.encode()))
    assert (verdict.outcome, verdict.cause, verdict.evidence["line"]) == ("failed", cause, what)


SGLANG_WARMING_UP = (SGLANG + "[2025-03-10 16:21:31] INFO:     Uvicorn running on http://127.0.0.1:30001 (Press CTRL+C to quit)\n"
                     "[2025-03-10 16:21:32] INFO:     127.0.0.1:51288 - \"GET /get_model_info HTTP/1.1\" 200 OK\n")


def test_a_watchdog_that_ends_the_warm_up_is_warmup_failed():
    log = SGLANG_WARMING_UP + "[2025-03-10 16:29:01 TP0] Watchdog timeout (self.watchdog_timeout=300)\nKilled\n"
    verdict = diagnose(io.BytesIO(log.encode()))
    assert (verdict.cause, verdict.evidence["line"]) == ("warmup_failed", "[2025-03-10 16:29:01 TP0] Watchdog timeout (self.watchdog_timeout=300)")


def test_an_exception_no_rule_explains_that_ends_the_warm_up_is_warmup_failed():
    error = "AttributeError: 'MlxModelRunnerStub' object has no attribute 'prefill_aware_swa'"
    verdict = diagnose(io.BytesIO((SGLANG_WARMING_UP + tb(error)).encode()))
    assert (verdict.cause, verdict.evidence["line"]) == ("warmup_failed", error)


def test_an_exception_naming_its_cause_during_the_warm_up_keeps_it():
    error = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert diagnose(io.BytesIO((SGLANG_WARMING_UP + tb(error)).encode())).cause == "cuda_oom"


def test_the_same_exception_before_the_http_server_is_up_is_other():
    error = "AttributeError: 'MlxModelRunnerStub' object has no attribute 'prefill_aware_swa'"
    assert diagnose(io.BytesIO((SGLANG + tb(error)).encode())).cause == "other"


def test_sglangs_warm_up_thread_dying_is_warmup_failed():
    log = (SGLANG + "INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)\n"
           "Exception in thread Thread-1 (_wait_and_warmup):\n"
           + tb("requests.exceptions.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"))
    verdict = diagnose(io.BytesIO(log.encode()))
    assert (verdict.cause, verdict.evidence["line"]) == (
        "warmup_failed", "requests.exceptions.JSONDecodeError: Expecting value: line 1 column 1 (char 0)")


def test_an_optional_import_logged_as_a_warning_explains_no_later_failure():
    error = "ValueError: Expected a torch.device with a specified index or an integer, but got:cuda"
    log = ("WARNING 03-09 01:21:09 [rocm.py:25] Failed to import from amdsmi with "
           "ModuleNotFoundError(\"No module named 'amdsmi'\")\n" + VLLM + tb(error, "[rank0]: "))
    verdict = diagnose(io.BytesIO(log.encode()))
    assert (verdict.cause, verdict.evidence["line"]) == ("other", "[rank0]: " + error)


def test_a_childs_closed_pipe_gives_way_to_the_childs_own_fatal_line():
    fatal = "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:368 'an illegal memory access was encountered'"
    log = (SGLANG + fatal + "\n[2025-02-18 09:50:38] DataParallelController hit an exception: Traceback (most recent call last):\n"
           '  File "/usr/lib/python3.10/multiprocessing/connection.py", line 383, in _recv\n    raise EOFError\nEOFError\n')
    verdict = diagnose(io.BytesIO(log.encode()))
    assert verdict.evidence["line"] == fatal


def test_an_abort_quoting_an_nccl_error_gives_the_evidence_to_its_first_copy():
    """terminate's what() repeats the watchdog's line: the first copy is the root."""
    timeout = ("[rank6]:[E207 01:29:36.730311765 ProcessGroupNCCL.cpp:616] [Rank 6] Watchdog caught collective operation "
               "timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600050 "
               "milliseconds before timing out.")
    log = (SGLANG + timeout + "\n[rank6]:[E207 01:29:36.730893283 ProcessGroupNCCL.cpp:636] [Rank 6] To avoid data "
           "inconsistency, we are taking the entire process down.\n"
           "terminate called after throwing an instance of 'c10::DistBackendError'\n"
           "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 6] Process group watchdog thread terminated with exception: "
           + timeout.split("] ", 2)[2] + "\nFatal Python error: Aborted\n")
    verdict = diagnose(io.BytesIO(log.encode()))
    assert verdict.cause == "nccl" and verdict.evidence == {"line": timeout, "lineno": 2}


def test_a_log_ending_on_a_long_burst_of_error_lines_names_the_first_its_rule_read():
    """The log's last words reach back a few lines; the burst they belong to
    began before that, where the runtime first said what failed."""
    trace = ["rtGetDeviceCount execution failed, reason=driver error:internal error[FUNC:FuncErrorReason]",
             "get device count failed, runtime result = 507899.[FUNC:ReportCallError]"]
    trace += [f"step {i} of the device setup failed, retCode=0x7020010[FUNC:SetDevice]" for i in range(7)]
    log = VLLM + "".join(f"(EngineCore pid=118)         {line}\n" for line in trace)
    verdict = diagnose(io.BytesIO(log.encode()))
    assert verdict.cause == "gpu_unavailable" and verdict.evidence["lineno"] == 2


def test_a_wrapper_whose_root_cause_is_cut_off_says_so():
    """A tail that starts after the engine's traceback: the wrapper is the evidence,
    and the verdict says the error it points to is not in the log."""
    log = VLLM + tb("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
                    "(APIServer pid=336) ")
    verdict = diagnose(io.BytesIO(log.encode()))
    assert verdict.cause == "other" and "Engine core initialization failed" in verdict.evidence["line"]
    assert "not in this log" in verdict.explanation


def test_an_engine_that_died_without_a_word_in_a_whole_log_is_worker_died():
    """The log holds the engine's start and no error of its own: the API
    server's "Failed core proc(s)" is the engine process dying (killed, or a
    native crash), not an error cut off above the window."""
    engine = ("(EngineCore_DP0 pid=7) INFO 10-01 22:24:58 [core.py:77] Initializing a V1 LLM engine (v0.10.2) "
              "with config: model='m'\n"
              "(EngineCore_DP0 pid=7) INFO 10-01 22:25:01 [default_loader.py:267] Loading weights took 3.1 seconds\n")
    log = VLLM + engine + tb("RuntimeError: Engine core initialization failed. See root cause above. "
                             "Failed core proc(s): {}", "(APIServer pid=336) ")
    verdict = diagnose(io.BytesIO(log.encode()))
    assert verdict.cause == "worker_died" and "Failed core proc(s)" in verdict.evidence["line"]
    with_error = VLLM + engine + tb("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
                                    "(EngineCore_DP0 pid=7) ") + tb(
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
        "(APIServer pid=336) ")
    assert diagnose(io.BytesIO(with_error.encode())).cause == "cuda_oom"


def test_gloo_peers_closing_after_a_rank_died_is_that_ranks_error():
    """A rank that dies closes its Gloo connections: the others' "Connection
    closed by peer" follow from its own error; alone, they are the cause."""
    closed = "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:547] Connection closed by peer [10.0.0.2]:58073"
    died = tb("AssertionError: topk lengths must match", "[2026-07-28 09:47:23 TP0] ")
    after = diagnose(io.BytesIO((SGLANG + died + tb(closed, "[2026-07-28 09:47:24 TP1] ")).encode()))
    assert after.cause == "other" and after.evidence["line"].endswith("AssertionError: topk lengths must match")
    assert diagnose(io.BytesIO((SGLANG + tb(closed)).encode())).cause == "nccl"


def test_a_segfault_right_after_a_failed_allocation_is_the_allocation():
    alloc = "ggml_aligned_malloc: insufficient memory (attempted to allocate 44668.09 MB)"
    log = ("ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 46837887616\n"
           "ggml_gallocr_reserve_n: failed to allocate CPU buffer of size 46837887616\n" + alloc + "\n"
           "make: *** [Makefile:20: llm-api] Segmentation fault\n")
    verdict = diagnose(io.BytesIO(log.encode()))
    assert verdict.cause == "host_oom" and verdict.evidence["lineno"] == 1


def test_a_segfault_with_no_cause_before_it_is_a_segfault():
    log = VLLM + "INFO 10-01 22:24:55 [loader.py:1] Loading weights\nSegmentation fault (core dumped)\n"
    assert diagnose(io.BytesIO(log.encode())).cause == "segfault"


def test_an_illegal_instruction_is_a_build_for_another_cpu():
    verdict = diagnose(io.BytesIO(b"main: build = 5600\nIllegal instruction (core dumped)\n"))
    assert (verdict.outcome, verdict.cause) == ("failed", "arch_unsupported")


def test_a_graph_capture_that_failed_on_something_else_than_memory_is_not_an_oom():
    error = "Exception: Capture cuda graph failed: mat1 and mat2 shapes cannot be multiplied (4x12288 and 8192x4096)"
    verdict = diagnose(io.BytesIO((SGLANG + tb(error, "[2025-03-12 10:00:00 TP0] ")).encode()))
    assert verdict.cause == "other"
    oom = "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert diagnose(io.BytesIO((SGLANG + tb(oom, "[2025-03-12 10:00:00 TP0] ")).encode())).cause == "cuda_oom"


def test_a_device_error_block_before_torch_npus_inner_error_is_its_evidence():
    """torch_npu's exception says only that the error "is reported as above":
    CANN's block printed before it names what failed."""
    fault = "[Error]: The aicore execution times out."
    log = (VLLM + "[rank0]:[E1229 13:22:33.992084477 compiler_depend.ts:444] operator():build/CMakeFiles/torch_npu.dir/"
           "compiler_depend.ts:34 NPU function error: call aclnnRmsNorm failed, error code is 507014\n"
           + fault + "\n        Rectify the fault based on the error information in the ascend log.\n"
           + tb("RuntimeError: The Inner error is reported as above. The process exits for this inner error, and the "
                "current working operator name is aclnnRmsNorm.", "(Worker_TP0 pid=359) ERROR 12-29 13:22:33 "
                "[multiproc_executor.py:824] "))
    verdict = diagnose(io.BytesIO(log.encode()))
    assert verdict.evidence["line"] == fault and "NPU kernel" in verdict.explanation


def test_llama_cpps_refused_argument_is_read_before_any_banner():
    """llama-server refuses a flag before it prints its build or loads anything."""
    log = ("warning: no usable GPU found, --gpu-layers option will be ignored\n"
           'error while handling argument "--spec-type": unknown speculative decoding type without draft model\n'
           "\nusage:\n")
    assert diagnose(io.BytesIO(log.encode())).cause == "bad_argument"


def test_a_terse_abort_after_llama_cpps_output_parser_failed_is_the_parse_error():
    """The abort's what() says only "JSON": the parser's own line says what failed."""
    parse_error = ("Failed to parse up to error: [json.exception.parse_error.101] parse error at line 5, column 191: "
                   "syntax error while parsing value - invalid string: forbidden character after backslash; last read: "
                   "'\"#include': <<<")
    log = ("llama_model_loader: loaded meta data with 35 key-value pairs and 579 tensors from qwen3.gguf\n"
           "main: server is listening on http://127.0.0.1:8080 - starting the main loop\n" + parse_error + "\nPartial parse: JSON\nterminate called after throwing an instance of 'std::runtime_error'\n"
           "  what():  JSON\nAborted (core dumped)\n")
    verdict = diagnose(io.BytesIO(log.encode()))
    assert verdict.outcome == "failed" and verdict.evidence["line"] == parse_error


@pytest.mark.parametrize(("code", "words", "cause"), [
    (207001, "Failed to apply for memory.", "cuda_oom"),
    (207004, "The device is unavailable.", "gpu_unavailable"),
    (507015, "The aicore execution is abnormal.", "other"),
])
def test_torch_npus_words_for_its_error_code_name_the_cause(code, words, cause):
    """torch_npu's exception gives only the runtime's code; its "[Error]:" line under it says what the code means."""
    prefix = "(EngineCore_DP0 pid=3132) ERROR 10-15 16:32:16 [core.py:708] "
    log = VLLM + tb("RuntimeError: npuSynchronizeDevice:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:508 NPU "
                    f"function error: AclrtSynchronizeDeviceWithTimeout, error code is {code}", prefix) \
        + prefix + "[ERROR] 2025-10-15-16:32:16 (PID:3132, Device:0, RankID:-1) ERR00100 PTA call acl api failed\n" \
        + prefix + f"[Error]: {words}\n"
    verdict = diagnose(io.BytesIO(log.encode()))
    assert (verdict.cause, verdict.evidence["line"]) == (cause, prefix + f"[Error]: {words}")


def test_an_nccl_watchdog_quoting_a_gpu_hardware_error_is_the_hardware():
    ecc = ("[rank1]:[E129 08:52:51.685329145 ProcessGroupNCCL.cpp:1595] [PG ID 2 PG GUID 3 Rank 1] Process group "
           "watchdog thread terminated with exception: CUDA error: uncorrectable ECC error encountered")
    log = (SGLANG + ecc + "\nterminate called after throwing an instance of 'c10::DistBackendError'\n"
           "  what():  [PG ID 2 PG GUID 3 Rank 1] Process group watchdog thread terminated with exception: "
           "CUDA error: uncorrectable ECC error encountered\nFatal Python error: Aborted\n")
    verdict = diagnose(io.BytesIO(log.encode()))
    assert (verdict.cause, verdict.evidence["line"]) == ("other", ecc) and "ECC" in verdict.explanation


def test_a_restart_after_a_failure_is_read_from_vllms_2026_banner():
    """systemd restarting vLLM 0.15+ (no "vLLM API server version" line, its banner instead):
    the second start is read afresh, and the first one's failure is listed as not deciding it."""
    banner = "(APIServer pid={}) INFO 02-22 06:34:50 [utils.py:325]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.15.1\n"
    failure = tb("ValueError: To serve at least one request with the models's max seq len (16384), (3.0 GiB KV cache "
                 "is needed, which is larger than the available KV cache memory (1.87 GiB).",
                 "(EngineCore_DP0 pid=2827) ERROR 02-22 06:35:27 [core.py:946] ")
    ready = "(APIServer pid=3285) INFO:     Application startup complete.\n"
    verdict = diagnose(io.BytesIO((banner.format(1633) + failure + banner.format(3285) + ready).encode()))
    assert (verdict.outcome, verdict.evidence["line"]) == ("ready", ready.strip())
    # the sibling services of a docker compose tail, before vLLM's banner, are not its ready line
    sibling = "asr-1  | INFO:     Application startup complete.\n"
    verdict = diagnose(io.BytesIO((sibling + "voxtral-1  | " + banner.format(1)).encode()))
    assert verdict.outcome != "ready"


def read(*lines: str):
    return diagnose(io.BytesIO("".join(line + "\n" for line in lines).encode()))


def test_an_exception_group_is_read_down_to_the_exception_inside_it():
    verdict = read(
        VLLM.rstrip("\n"),
        "ERROR 10-01 22:24:58 [core.py:1] EngineCore failed to start.",
        "  + Exception Group Traceback (most recent call last):",
        '  |   File "/usr/lib/python3.12/site-packages/anyio/_backends/_asyncio.py", line 678, in __aexit__',
        "  |     raise BaseExceptionGroup(",
        "  | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)",
        "  +-+---------------- 1 ----------------",
        "    | Traceback (most recent call last):",
        '    |   File "/usr/lib/python3.12/site-packages/vllm/worker/model_runner.py", line 72, in load_model',
        "    |     self.model = get_model()",
        "    | torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "    +------------------------------------",
    )
    assert (verdict.outcome, verdict.cause, verdict.evidence["line"]) == (
        "failed", "cuda_oom", "    | torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")


def test_a_traceback_inside_an_indented_message_is_read_to_its_exception():
    # Ray Serve's status quotes the replica's traceback in a YAML block, every line indented
    verdict = read(
        "  qwen2-vl-72b-instruct:",
        "    status: DEPLOY_FAILED",
        "    message: Failed to update the deployments ['VLLMDeployment'].",
        "    last_deployed_time_s: 1741284567.6790574",
        "    deployments:",
        "      VLLMDeployment:",
        "        status: DEPLOY_FAILED",
        "        message: |-",
        "          The deployment failed to start 3 times in a row. Error:",
        "          ray::ServeReplica:VLLMDeployment.initialize_and_get_metadata() (pid=1535, ip=10.191.48.218)",
        '            File "/usr/lib/python3.10/concurrent/futures/_base.py", line 403, in __get_result',
        "              raise self._exception",
        '            File "/venv/lib/python3.10/site-packages/ray/serve/_private/replica.py", line 965, in initialize',
        "              raise RuntimeError(traceback.format_exc()) from None",
        "          RuntimeError: Traceback (most recent call last):",
        '            File "/venv/lib/python3.10/site-packages/vllm/worker/worker.py", line 150, in init_device',
        "              torch.cuda.set_device(self.device)",
        "          RuntimeError: No CUDA GPUs are available",
        "  qwen2-vl-72b-instruct-pt2:",
        "    status: DEPLOYING",
    )
    assert (verdict.outcome, verdict.cause, verdict.evidence["line"]) == (
        "failed", "gpu_unavailable", "          RuntimeError: No CUDA GPUs are available")


def test_a_clean_exit_after_a_watchdog_is_not_the_root():
    # SGLang's watchdog signals the server, whose uvicorn then exits cleanly
    # ("SystemExit: 0" ending a traceback): the watchdog's line says what happened.
    log = (SGLANG + "[2025-12-08 16:20:30] The server is fired up and ready to roll!\n"
           "[2025-12-08 16:26:07 TP2] Watchdog timeout (self.watchdog_timeout=180.0)\n"
           + tb("SystemExit: 0") + tb("asyncio.exceptions.CancelledError"))
    verdict = diagnose(io.BytesIO(log.encode()))
    assert (verdict.outcome, verdict.evidence["line"]) == (
        "failed", "[2025-12-08 16:26:07 TP2] Watchdog timeout (self.watchdog_timeout=180.0)")


def test_a_ready_server_that_exits_cleanly_stays_ready():
    log = SGLANG + "[2025-12-08 16:20:30] The server is fired up and ready to roll!\n" + tb("SystemExit: 0")
    assert diagnose(io.BytesIO(log.encode())).outcome == "ready"


TGI_WARMING_UP = (
    "2025-12-18T10:00:00.000000Z  INFO text_generation_launcher: Args {\n"
    "2025-12-18T10:00:20.000000Z  INFO shard-manager: text_generation_launcher: Shard ready in 15.2s rank=0\n"
    "2025-12-18T10:00:21.000000Z  INFO text_generation_launcher: Starting Webserver\n"
    "2025-12-18T10:00:21.500000Z  INFO text_generation_router_v3: backends/v3/src/lib.rs:125: Warming up model\n")
TGI_ROUTER_FAILED = (
    "2025-12-18T10:00:40.000000Z ERROR text_generation_launcher: Webserver Crashed\n"
    "2025-12-18T10:00:40.000000Z  INFO text_generation_launcher: Shutting down shards\n"
    "Error: WebserverFailed\n")


@pytest.mark.parametrize(("error", "cause"), [
    ("Error: Backend(NotEnoughMemory(32768))", "kv_cache_too_small"),  # TGI 2.3+
    ("Error: WebServer(NotEnoughMemory(32768))", "kv_cache_too_small"),  # TGI 2.1-2.2
    ('Error: Backend(Warmup(Generation("CANCELLED")))', "warmup_failed"),
    ('Error: Warmup(Generation("CANCELLED"))', "warmup_failed"),  # TGI 0.9.2-2.0
])
def test_tgis_router_error_in_its_debug_form_names_the_cause(error, cause):
    verdict = diagnose(io.BytesIO((TGI_WARMING_UP + error + "\n" + TGI_ROUTER_FAILED).encode()))
    assert (verdict.outcome, verdict.cause, verdict.evidence["line"]) == ("failed", cause, error)


def test_a_shards_error_before_tgis_warm_up_error_is_the_cause():
    shard = "RuntimeError: FlashAttention only supports Ampere GPUs or newer."
    log = TGI_WARMING_UP + tb(shard) + 'Error: Backend(Warmup(Generation("CANCELLED")))\n' + TGI_ROUTER_FAILED
    verdict = diagnose(io.BytesIO(log.encode()))
    assert (verdict.cause, verdict.evidence["line"]) == ("arch_unsupported", shard)


@pytest.mark.parametrize(("line", "cause"), [
    ("[TM][FATAL][0821.10:00:03.123456][convert_v3.cu:192] Invalid combination: 61 f16 u4 f16 false", "arch_unsupported"),
    ("[TM][FATAL][0821.10:00:05.123456][turbomind.cc:295] Check failed: cache_ratio < 1. (2000 vs. 1) object-cache "
     "path no longer accepts cache_max_block_count as a block count", "bad_argument"),
    ("[TM][FATAL][0821.10:00:03.123456][allocator.cc:49] CUDA error: out of memory", "cuda_oom"),
])
def test_turbomind_fatal_checks_that_say_why_name_the_cause(line, cause):
    log = ("2026-08-21 10:00:00,123 - lmdeploy - INFO - turbomind.py:271 - turbomind engine config:\n" + line + "\n"
           "Aborted (core dumped)\n")
    verdict = diagnose(io.BytesIO(log.encode()))
    assert (verdict.outcome, verdict.cause, verdict.evidence["line"]) == ("failed", cause, line)


LLAMA_ROUTER = ("0.00.000.050 I srv  llama_server: initializing ...\n"
                "0.00.000.100 I srv  llama_server: starting server in router mode. models will be automatically "
                "loaded on-demand\n")


@pytest.mark.parametrize(("error", "cause"), [
    ("error: '/models' does not exist or is not a directory", "model_not_found"),
    ("model 'qwen3-8b' appears multiple times", "bad_argument"),
])
def test_llama_servers_router_that_rejects_its_models_names_why(error, cause):
    line = f"0.00.000.200 E srv  llama_server: failed to initialize router models: {error}"
    verdict = diagnose(io.BytesIO((LLAMA_ROUTER + line + "\n\n").encode()))
    assert (verdict.outcome, verdict.cause, verdict.evidence["line"]) == ("failed", cause, line)


def test_llama_servers_listener_that_stops_after_ready_is_a_crash():
    line = "0.09.000.100 E srv         start: listener on http://127.0.0.1:8080 stopped unexpectedly"
    log = LLAMA_ROUTER + "0.00.512.003 I srv  llama_server: listening on http://127.0.0.1:8080\n" + line + "\n"
    verdict = diagnose(io.BytesIO(log.encode()))
    assert (verdict.outcome, verdict.phase, verdict.evidence["line"]) == ("failed", "serving", line)


def test_a_file_that_is_not_a_gguf_is_corrupt_not_missing():
    # llama.cpp's loader says "failed to load model from" after any file it cannot read;
    # the line before it says why (an outside user's text file named .gguf)
    why = "gguf_init_from_reader: invalid magic characters: 'not ', expected 'GGUF'"
    log = (why + "\nllama_model_load: error loading model: llama_model_loader: failed to load model from /m/bad.gguf\n"
           "llama_model_load_from_file_impl: failed to load model\n" + tb("ValueError: Failed to load model from file: /m/bad.gguf"))
    verdict = diagnose(io.BytesIO(log.encode()))
    assert verdict.cause == "corrupt_checkpoint" and why not in [b["line"] for b in verdict.benign]


def test_a_gguf_that_is_not_there_is_still_missing():
    log = ("gguf_init_from_file: failed to open GGUF file '/m/x.gguf' (No such file or directory)\n"
           "llama_model_load: error loading model: llama_model_loader: failed to load model from /m/x.gguf\n"
           "llama_model_load_from_file_impl: failed to load model\n")
    assert diagnose(io.BytesIO(log.encode())).cause == "model_not_found"
