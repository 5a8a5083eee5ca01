"""How one raw line splits into the prefixes in front of it and the message rules read."""

from firedup.lines import parse


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


def test_a_number_and_colon_inside_a_message_stays():
    line = parse("INFO 04-25 08:50:55 [worker.py:1] 0: rank 0 ready")
    assert line.message == "0: rank 0 ready"


def test_tensorrt_llms_timestamp_and_level_are_peeled():
    line = parse("[06/02/2026-03:50:10] [TRT-LLM] [I] Preparing to run throughput benchmark...")
    assert line.message == "Preparing to run throughput benchmark..."
    assert line.level == "INFO"
