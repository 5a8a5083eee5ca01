"""The rule packs: they load, every cause has a rule, every rule reads its own examples."""

import io

import pytest

from firedup import diagnose, rules
from firedup.engine import Engine

RULESET = rules.load()
ALL_RULES = RULESET.rules


def _read_as(rule, engine, example):
    """The rules that read an example: for a frame rule, the rule naming the
    cause of the example traceback's exception; for a cause rule also the
    rule naming the cause of an example traceback's exception (a bare
    AssertionError read with its assert statement). A rule that reads only
    after another rule's line gets that line first."""
    if rule.after is not None and rule.kind != "ready":
        first = next(r for r in ALL_RULES if r.id == rule.after[0])
        engine.feed(first.examples[0].encode() + b"\n")
    signals = engine.feed(example.encode() + b"\n") + engine.close()
    explained = [s.cause_rule.id for s in signals if s.kind == "exception" and s.cause_rule is not None]
    if rule.frame is not None:
        return explained
    read = [s.rule.id for s in signals if s.rule is not None and s.kind == rule.kind]
    return read + explained if rule.kind == "cause" else read


@pytest.mark.parametrize("rule", ALL_RULES, ids=[r.id for r in ALL_RULES])
def test_rule_reads_its_examples(rule):
    for example in rule.examples:
        read = _read_as(rule, Engine(server=rule.family), example)
        assert read and read[0] == rule.id, f"{example!r} was read as {read}"


FRAME_RULES = [r for r in ALL_RULES if r.frame is not None]


@pytest.mark.parametrize("rule", FRAME_RULES, ids=[r.id for r in FRAME_RULES])
def test_a_frame_rule_needs_the_frame(rule):
    """The exception line alone, without its traceback, names no cause by this rule."""
    for example in rule.examples:
        bare = example.splitlines()[-1]
        assert rule.id not in _read_as(rule, Engine(server=rule.family), bare)


UNGATED = [r for r in ALL_RULES if not r.gated]


@pytest.mark.parametrize("rule", UNGATED, ids=[r.id for r in UNGATED])
def test_an_ungated_rule_reads_its_examples_with_the_family_unknown(rule):
    assert rule.family != "generic"
    for example in rule.examples:
        read = _read_as(rule, Engine(), example)
        assert read and read[0] == rule.id, f"{example!r} was read as {read}"


def test_a_gated_rule_waits_for_its_family():
    engine = Engine()
    line = b"[2025-04-09 05:05:13 TP0] Load weight begin. avail mem=59.60 GB\n"  # sglang-load-weight
    assert not [s for s in engine.feed(line) + engine.close() if s.kind == "phase"]


def test_every_cause_slug_has_a_rule():
    named = {r.cause for r in ALL_RULES if r.cause}
    assert set(rules.CAUSES) - {"other"} <= named


def test_every_family_has_a_pack_with_a_ready_rule():
    for family in rules.FAMILIES:
        pack = RULESET.packs[family]
        assert pack.detect and pack.command and pack.health
        ready = [r for r in ALL_RULES if r.kind == "ready" and r.family in (family, "generic")]
        assert ready, family


@pytest.mark.parametrize("argv,family", [
    (["python", "-m", "sglang.launch_server", "--model-path", "x"], "sglang"),
    (["python", "-m", "sglang_router.launch_router", "--worker-urls", "http://127.0.0.1:30001"], "sglang"),
    (["vllm", "serve", "x"], "vllm"),
    (["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "x"], "vllm"),
    (["llama-server", "-m", "x.gguf"], "llamacpp"),
    (["python", "-m", "llama_cpp.server", "--model", "x.gguf"], "llamacpp"),
    (["text-generation-launcher", "--model-id", "x"], "tgi"),
    (["trtllm-serve", "x"], "trtllm"),
    (["lmdeploy", "serve", "api_server", "x"], "lmdeploy"),
    (["transformers", "serve", "x"], "transformers"),
    (["python", "server.py"], None),
])
def test_family_from_command_line(argv, family):
    assert RULESET.detect_command(argv) == family


def test_bad_pack_is_refused():
    with pytest.raises(rules.RuleError, match="needs an explanation"):
        rules._load_pack("vllm", 'family = "vllm"\n[[rule]]\nid = "x"\nkind = "cause"\ncause = "nccl"\n'
                                 'pattern = "x"\nexamples = ["x"]\n', 0)
    with pytest.raises(rules.RuleError, match="unknown cause"):
        rules._load_pack("vllm", 'family = "vllm"\n[[rule]]\nid = "x"\nkind = "fatal"\ncause = "nope"\n'
                                 'pattern = "x"\nexamples = ["x"]\n', 0)
    with pytest.raises(rules.RuleError, match="bad pattern"):
        rules._load_pack("vllm", 'family = "vllm"\n[[rule]]\nid = "x"\nkind = "fatal"\n'
                                 'pattern = "(x"\nexamples = ["x"]\n', 0)
    with pytest.raises(rules.RuleError, match="only a heartbeat"):
        rules._load_pack("vllm", 'family = "vllm"\n[[rule]]\nid = "x"\nkind = "phase"\nphase = "init"\n'
                                 'waiting = true\npattern = "x"\nexamples = ["x"]\n', 0)
    with pytest.raises(rules.RuleError, match="remedies must map families"):
        rules._load_pack("vllm", 'family = "vllm"\n[[rule]]\nid = "x"\nkind = "cause"\ncause = "nccl"\n'
                                 'explanation = "e"\nremedy = "r"\nremedies = { ollama = "r" }\n'
                                 'pattern = "x"\nexamples = ["x"]\n', 0)
    with pytest.raises(rules.RuleError, match="only a frame rule narrows"):
        rules._load_pack("vllm", 'family = "vllm"\n[[rule]]\nid = "x"\nkind = "cause"\ncause = "other"\n'
                                 'explanation = "e"\nremedy = "r"\nnarrows = ["missing-module"]\n'
                                 'pattern = "x"\nexamples = ["x"]\n', 0)


def test_narrows_must_name_a_message_rule_naming_a_cause():
    """Checked across packs: a narrowed rule may live in another pack, but must exist
    and be a message rule with a cause (a frame rule or a ready line narrows nothing)."""
    def pack(narrows):
        return ('family = "generic"\n[[rule]]\nid = "msg"\nkind = "cause"\ncause = "missing_module"\n'
                'explanation = "e"\nremedy = "r"\npattern = "^No module"\nexamples = ["No module"]\n'
                '[[rule]]\nid = "up"\nkind = "ready"\npattern = "^up$"\nexamples = ["up"]\n'
                '[[rule]]\nid = "frm"\nkind = "cause"\ncause = "version_mismatch"\nexplanation = "e"\n'
                f'remedy = "r"\nnarrows = {narrows}\npattern = "^No module"\nframe = "plugin/"\n'
                'examples = ["""Traceback (most recent call last):\n  File \\"/plugin/x.py\\", line 1, in <module>\n'
                '    import a\nNo module"""]\n')
    assert [r.id for r in rules._assemble({"generic": pack('["msg"]')}).rules] == ["msg", "up", "frm"]
    for stray in ('["nope"]', '["up"]', '["frm"]'):
        with pytest.raises(rules.RuleError, match="narrows only message rules naming a cause"):
            rules._assemble({"generic": pack(stray)})


def test_a_narrowing_frame_rule_leaves_the_rest_to_the_message_rule():
    """vLLM's own import of a module it lacks is a broken install (missing-module);
    a plugin's import of it is a version mismatch (plugin-imports-moved-module)."""
    def cause(frame):
        engine = Engine()
        traceback = ('Traceback (most recent call last):\n'
                     f'  File "{frame}", line 4, in <module>\n'
                     '    from vllm.benchmarks.serve import main\n'
                     "ModuleNotFoundError: No module named 'vllm.benchmarks.serve'\n")
        return [s.cause_rule.id for s in engine.feed(traceback.encode()) + engine.close()
                if s.kind == "exception"]
    assert cause("/workspace/vllm/vllm/entrypoints/cli/benchmark/serve.py") == ["missing-module"]
    assert cause("/workspace/vllm-omni/vllm_omni/entrypoints/cli/serve.py") == ["plugin-imports-moved-module"]


@pytest.mark.parametrize("log,server,words", [
    ("RuntimeError: CUDA error: out of memory\n", "vllm", "--gpu-memory-utilization"),
    ("llama_model_load: error loading model: unable to allocate CUDA0 buffer\n", "llamacpp", "-ngl"),
    ("[TensorRT-LLM][ERROR] CUDA runtime error in cudaMalloc: out of memory\n", "trtllm", "free_gpu_memory_fraction"),
])
def test_a_generic_cause_gives_the_remedy_in_the_failed_servers_own_settings(log, server, words):
    """cuda_oom's remedy names SGLang's and vLLM's flags, except where the log is
    another family's: llama-server's layers on the GPU, TensorRT-LLM's KV cache share."""
    v = diagnose(io.BytesIO(log.encode()), server=server)
    assert v.cause == "cuda_oom" and words in v.remedy
