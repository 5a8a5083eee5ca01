"""How one raw line splits into the prefixes in front of it and the message rules read."""

from firedup.lines import from_json, parse, record_lines


def test_slurm_task_label_is_peeled_before_the_servers_own_prefixes():
    line = parse("1: INFO 04-25 08:50:55 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000")
    assert line.message == "Starting vLLM API server on http://0.0.0.0:8000"
    assert line.level == "INFO"


def test_slurm_task_label_keeps_a_frames_indent():
    assert parse('0:   File "/x/server.py", line 3, in main').message == '  File "/x/server.py", line 3, in main'


def test_kubectl_pod_prefix_is_the_lines_origin():
    line = parse("[pod/vllm-0/server] (EngineCore_DP0 pid=7) ERROR 04-25 08:50:55 [core.py:1] "
                 "EngineCore failed to start.")
    assert line.message == "EngineCore failed to start."
    assert line.outer == "[pod/vllm-0/server]"
    assert line.level == "ERROR"


def test_a_container_runtimes_log_file_prefix_is_peeled():
    """A Kubernetes node's container log (CRI): its time, the stream, a full (F) or partial (P) line."""
    line = parse("2026-01-01T00:00:00.123456789Z stderr F (APIServer pid=1) INFO:     Application startup complete.")
    assert line.message == "Application startup complete."
    assert line.origin == "(APIServer pid=1)"
    assert parse("2026-01-01T00:00:00.123456789+00:00 stdout P Loading weights").message == "Loading weights"


def test_a_wrappers_echo_of_its_child_streams_is_peeled():
    line = parse("vLLM STDOUT: INFO 05-05 15:26:17 [api_server.py:1028] Starting vLLM API server on http://0.0.0.0:8000")
    assert (line.message, line.origin, line.level) == (
        "Starting vLLM API server on http://0.0.0.0:8000", "vLLM", "INFO")
    assert parse('[stderr]   File "/x/server.py", line 3, in main').message == '  File "/x/server.py", line 3, in main'
    assert parse("stderr: RuntimeError: boom").message == "RuntimeError: boom"


def test_a_log_stores_export_of_epoch_time_and_a_tab_is_peeled():
    """Each line behind its time in epoch milliseconds (or nanoseconds), a tab, its ISO time and a tab."""
    line = parse("1779264164797\t2026-05-20T08:02:44.797Z\t[2026-05-20 08:02:44 PP0 TP7] Scheduler hit an exception: x")
    assert line.message == "Scheduler hit an exception: x"
    assert parse("1779264164797000000\t2026-05-20T08:02:44.797Z\t  File \"/x/s.py\", line 3, in main").message == (
        '  File "/x/s.py", line 3, in main')
    assert parse("17792641647971\tready").message == "17792641647971\tready"  # no such time: a message's own


def test_a_number_and_colon_inside_a_message_stays():
    line = parse("INFO 04-25 08:50:55 [worker.py:1] 0: rank 0 ready")
    assert line.message == "0: rank 0 ready"


def test_tensorrt_llms_timestamp_and_level_are_peeled():
    line = parse("[06/02/2026-03:50:10] [TRT-LLM] [I] Preparing to run throughput benchmark...")
    assert line.message == "Preparing to run throughput benchmark..."
    assert line.level == "INFO"


def test_tensorrt_llm_1_3s_module_tag_and_rank_are_peeled_not_its_messages_own_brackets():
    line = parse("[10/02/2026-08:00:00] [TRT-LLM] [I] [batchmgr][RANK 3] [MemUsageChange] Allocated 0.56 GiB")
    assert (line.message, line.origin, line.level) == ("[MemUsageChange] Allocated 0.56 GiB", "[RANK 3]", "INFO")
    line = parse("[07/07/2026-03:31:36] [TRT-LLM] [E] [executor] Executor worker initialization error: Traceback")
    assert (line.message, line.level) == ("Executor worker initialization error: Traceback", "ERROR")
    # the PyTorch backend's rank comes before the level
    line = parse("[06/21/2025-01:30:12] [TRT-LLM] [RANK 0] [E] [Autotuner]: Failed when profiling")
    assert (line.message, line.level) == ("[Autotuner]: Failed when profiling", "ERROR")


def test_pytorchs_cpp_log_prefix_is_peeled_after_its_rank():
    line = parse("[rank0]:[W1028 11:50:13.091528000 ProcessGroupNCCL.cpp:1496] Warning: WARNING: "
                 "destroy_process_group() was not called before program exit")
    assert line.message.startswith("Warning: WARNING: destroy_process_group()")
    assert (line.origin, line.level) == ("[rank0]", "WARNING")
    line = parse("[E1028 11:50:13.091528000 TCPStore.cpp:125] [c10d] recvValue failed")
    assert (line.message, line.level) == ("[c10d] recvValue failed", "ERROR")
    assert parse("[rank0]: Traceback (most recent call last):").message == "Traceback (most recent call last):"
    # a month of one digit is not padded; before torch 2.2 no time at all
    line = parse("[W612 12:16:52.310912012 socket.cpp:767] [c10d] The server socket has failed to bind")
    assert (line.message, line.level) == ("[c10d] The server socket has failed to bind", "WARNING")
    line = parse("[W socket.cpp:436] [c10d] The server socket has failed to bind to [::]:29500")
    assert (line.message, line.level) == ("[c10d] The server socket has failed to bind to [::]:29500", "WARNING")


def test_a_tgi_json_record_reads_as_the_lines_tgi_prints_without_json():
    record = ('{"timestamp":"2023-12-05T22:36:50.1Z","level":"ERROR","fields":{"message":"Error when initializing '
              'model\\nTraceback (most recent call last):\\nValueError: bad"},"target":"text_generation_launcher",'
              '"span":{"rank":0,"name":"shard-manager"}}')
    first, *rest = from_json(record)
    assert parse(first).message == "shard-manager: text_generation_launcher: Error when initializing model"
    assert parse(first).level == "ERROR"
    assert rest == ["Traceback (most recent call last):", "ValueError: bad"]


def test_a_python_json_record_keeps_its_message_and_level():
    line = parse(from_json('{"asctime":"2025-01-01 12:00:00,123","levelname":"WARNING","name":"vllm",'
                           '"message":"Token indices sequence length is longer"}')[0])
    assert (line.message, line.level) == ("Token indices sequence length is longer", "WARNING")


def test_a_json_record_whose_time_has_no_year_still_reads_as_its_message():
    # NVIDIA NIM's records: "time" without the year, which no prefix of a log has
    line = parse(from_json('{"level": "INFO", "time": "02-20 21:47:39.338", "file_path": "/usr/local/lib/python3.10/'
                           'dist-packages/uvicorn/lifespan/on.py", "line_number": "62", "message": '
                           '"Application startup complete.", "exc_info": "None", "stack_info": "None"}')[0])
    assert (line.message, line.level) == ("Application startup complete.", "INFO")


def test_a_json_record_behind_a_collectors_prefix_reads_as_its_lines_with_the_prefix():
    record = ('{"timestamp":"2023-12-05T22:36:50.1Z","level":"ERROR","fields":{"message":"Shard failed\\n'
              'ValueError: bad"},"target":"text_generation_launcher"}')
    first, second = record_lines("tgi-1  | " + record)
    assert parse(first).message == "text_generation_launcher: Shard failed"
    assert (parse(second).message, parse(second).origin) == ("ValueError: bad", "tgi-1")
    assert record_lines("INFO 10-01 10:00:00 [utils.py:1] non-default args: {'port': 8000}") is None


def test_llamacpps_json_log_and_plain_text_are_not_records():
    assert from_json('{"tid":"1","timestamp":1711270965,"level":"INFO","function":"main","line":2881,'
                     '"msg":"model loaded"}') is None
    assert from_json("{not json}") is None
    assert from_json('{"a": 1}') is None


def test_a_logging_format_of_bracketed_fields_is_peeled():
    line = parse("[2025-03-05 14:28:45,820] [ERROR] [MainThread] [vllm.worker.worker_base] >>> RuntimeError: boom")
    assert (line.message, line.level) == ("RuntimeError: boom", "ERROR")


def test_a_logging_format_of_adjacent_brackets_is_peeled():
    line = parse("[2026-03-13 15:56:59][INFO]: POST /v1/chat/completions HTTP/1.1 500 Internal Server Error")
    assert (line.message, line.level) == ("POST /v1/chat/completions HTTP/1.1 500 Internal Server Error", "INFO")
    line = parse("[2026-03-13 15:51:14][http_server.py:1935][INFO]: The server is fired up and ready to roll!")
    assert (line.message, line.level) == ("The server is fired up and ready to roll!", "INFO")


def test_a_relaying_loggers_format_is_peeled_and_the_servers_own_level_kept():
    # "%(asctime)s - %(levelname)s - %(name)s: ", a launcher relaying vLLM's lines at INFO
    line = parse("2024-07-13 15:07:34,932 - INFO - vLLM: ERROR 07-13 15:07:34 async_llm_engine.py:53]   "
                 'File "/x/async_llm_engine.py", line 589, in run_engine_loop')
    assert line.message == '  File "/x/async_llm_engine.py", line 589, in run_engine_loop'
    assert line.level == "ERROR" and line.origin == "vLLM"
    assert parse("2024-07-13 15:07:34,932 - INFO - vLLM: Traceback (most recent call last):").level == ""


def test_llama_cpps_2024_log_file_prefix_is_peeled():
    # llama.log (and llamafile's): a unix time, then the source file, its line and the function
    line = parse("[1714488619] [llama.cpp/llava/clip.cpp:  143][             get_key_idx] "
                 "key clip.vision.mm_patch_merge_type not found in file")
    assert line.message == "key clip.vision.mm_patch_merge_type not found in file"
    assert parse("[1714488620] llama server listening at http://127.0.0.1:8080").message \
        == "llama server listening at http://127.0.0.1:8080"


def test_sterns_pod_and_container_are_peeled_and_name_the_origin():
    line = parse('vllm-7d9c6b5f4-x2k8p vllm   File "/x/server.py", line 3, in main')
    assert line.message == '  File "/x/server.py", line 3, in main'  # a frame keeps its indent
    assert line.origin == "vllm-7d9c6b5f4-x2k8p vllm"
    assert parse("vllm-0 vllm-pod starting").message == "vllm-0 vllm-pod starting"  # no pod hashes: a message


def test_podman_composes_bracketed_service_and_an_exports_timestamp_and_tab_are_peeled():
    assert parse("[vllm] | INFO:     Application startup complete.").message == "Application startup complete."
    assert parse("2026-05-01T10:00:00.123Z\tmain: server is listening on http://127.0.0.1:8080").message \
        == "main: server is listening on http://127.0.0.1:8080"


def test_uvicorns_level_behind_its_loggers_name_is_peeled_but_a_messages_own_words_are_kept():
    # KServe's format: "%(asctime)s %(name)s %(levelprefix)s %(message)s"
    line = parse("2025-03-14 06:05:36.143 uvicorn.error INFO:     Application startup complete.")
    assert (line.message, line.level) == ("Application startup complete.", "INFO")
    assert parse("CUDA ERROR: out of memory").message == "CUDA ERROR: out of memory"


def test_a_log_viewers_timestamp_column_is_peeled_and_the_frames_keep_their_indent():
    line = parse("2026-04-19 12:55:33.728 | (EngineCore pid=196) ERROR 04-19 10:55:33 [c.py:1] Engine died.")
    assert line.message == "Engine died." and line.origin == "(EngineCore pid=196)"
    frame = '  File "/x/core.py", line 3, in run'
    assert parse("2026-04-19 12:55:33.729 | " + frame).message == frame


def test_nvidia_nims_record_prefix_with_the_year_is_peeled_with_its_level():
    line = parse("INFO 2025-12-07 23:26:58.596 on.py:62] Application startup complete.")
    assert line.message == "Application startup complete." and line.level == "INFO"
    line = parse("ERROR 2025-07-21 14:34:24.934 async_trtllm_engine_factory.py:62] Bfloat16 is only supported")
    assert line.message == "Bfloat16 is only supported" and line.level == "ERROR"


def test_rays_task_and_serve_replica_prefixes_are_peeled():
    prefixes = ("(pid=4242) ", "(pid=4242, ip=10.0.0.2) ", "(ServeReplica:default:LLMServer pid=77) ", "(task, pid=9) ")
    for prefix in prefixes:
        line = parse(prefix + "INFO 10-01 10:00:00 [core.py:1] Waiting for init message from front-end.")
        assert line.message == "Waiting for init message from front-end." and line.origin == prefix.strip()


def test_a_launchers_tag_for_each_server_of_a_disaggregated_deployment_is_its_origin():
    for tag in ("[prefill-0]", "[decode-1]"):
        line = parse(tag + " (APIServer pid=157) INFO:     Application startup complete.")
        assert line.message == "Application startup complete." and line.outer == tag
    assert parse("[2025-04-09 05:05:13 TP0] Load weight begin.").message == "Load weight begin."


def test_a_vllm_workers_name_with_its_parallel_rank_is_the_lines_origin():
    line = parse("(VllmWorker TP1 pid=21355) ERROR 08-22 09:46:12 [multiproc_executor.py:559] KeyError: 'x'")
    assert (line.origin, line.level, line.message) == ("(VllmWorker TP1 pid=21355)", "ERROR", "KeyError: 'x'")


def test_colour_codes_that_lost_their_escape_are_removed():
    for raw in ("[36m(pid=860)[0m INFO 04-16 10:27:44 [__init__.py:239] Automatically detected platform cuda.",
                "←[36m(pid=860)←[0m INFO 04-16 10:27:44 [__init__.py:239] Automatically detected platform cuda.",
                "^[[36m(pid=860)^[[0m INFO 04-16 10:27:44 [__init__.py:239] Automatically detected platform cuda."):
        assert parse(raw).message == "Automatically detected platform cuda." and parse(raw).origin == "(pid=860)"
    assert parse("Waited [2m] for it").message == "Waited [2m] for it"  # no reset code: not a colour


def test_an_exception_groups_border_is_peeled_and_the_frames_keep_their_indent():
    assert parse("  + Exception Group Traceback (most recent call last):").message == \
        "Exception Group Traceback (most recent call last):"
    assert parse('  |   File "/x/anyio/_backends/_asyncio.py", line 678, in __aexit__').message == \
        '  File "/x/anyio/_backends/_asyncio.py", line 678, in __aexit__'
    assert parse("    | AssertionError").message == "AssertionError"
    assert parse("vllm-1  |     |     raise exc").message == "    raise exc"


def test_a_bullet_is_not_an_exception_groups_border():
    assert parse("INFO:tgi-server:        + Waiting for TGI server to be ready").message == \
        "        + Waiting for TGI server to be ready"


def test_a_prefix_on_an_otherwise_blank_line_leaves_a_blank_line():
    # rstrip took the space the prefix ends with; the blank line keeps a traceback's chain together
    for prefix in ("0:", "[pod/vllm-0/server]", "vllm-1  |", "[2025-05-23T04:39:51Z]", "2025-05-23 10:00:00",
                   "     12"):
        assert parse(prefix).message == "", prefix
    assert parse("12").message == "12"


def test_a_log_copied_from_a_rendered_github_page_loses_the_links_the_page_made():
    line = parse("2024-02-09T09:28:53.243856Z  INFO text_generation_router: router/src/[main.rs:317]"
                 "(http://main.rs:317/): Connected")
    assert line.message.endswith(" router/src/main.rs:317: Connected")
    assert "[main.rs:317](http://main.rs:317/)" in line.text  # the evidence stays as written


def test_a_line_a_reporter_made_bold_is_read_without_its_stars():
    line = parse("**KeyError: 'model.layers.3.mlp.shared_experts.down_proj.weight_scale'**")
    assert line.message == "KeyError: 'model.layers.3.mlp.shared_experts.down_proj.weight_scale'"
    assert parse("**").message == "**"


def test_a_bracket_before_an_m_is_no_colour_code_without_a_number():
    line = parse("[36m(pid=4242)[0m router/src/[main.rs:317](http://main.rs:317/): Connected")
    assert line.message.endswith("router/src/main.rs:317: Connected")


def test_a_markdown_quotes_marker_is_peeled_and_the_quoted_lines_indent_kept():
    quoted = parse("> > WARNING 01-10 21:49:05 model_runner_base.py:143] Failed to pickle inputs")
    assert (quoted.level, quoted.message) == ("WARNING", "Failed to pickle inputs")
    assert parse('>   File "/v/x.py", line 1, in f').message == '  File "/v/x.py", line 1, in f'
    assert parse(">").message == ""  # a blank line of the quote


def test_a_quote_relayed_behind_a_collectors_prefix_is_peeled_too():
    line = parse("Dec 04 04:14:06 gpu01 vllm[1234]: > ERROR 01-10 21:49:05 engine.py:366] Error in model execution")
    assert (line.level, line.message) == ("ERROR", "Error in model execution")
