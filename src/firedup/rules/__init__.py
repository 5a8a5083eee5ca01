"""Rule packs: one TOML file per server family, compiled into one ordered rule set.

A pack lists, in priority order, rules of these kinds: ``ready``, ``phase``,
``progress``, ``heartbeat``, ``fatal``, ``cause``, ``benign``, ``config``,
``stopping`` (the server says it is shutting down), ``stopped`` (it was
stopped from outside: a signal, Ctrl-C), ``last_words`` (an error-looking
line no other rule reads: it decides only among the last lines of a log that
ended with no other verdict, see ``Engine.close``). Any rule may also move the
phase (``phase = "weights"``); a ready rule may say that the server prints it
before it binds its port (``before_bind = true``), or that it proves only that
the server serves (``served = true``: a request answered 200), the evidence
then being the last line before it that a rule marked ``up = true`` reads
(where the server said its HTTP server was up). Packs of server families
come before ``generic``, so that a family's reading of a line (a benign
"No module named ..." probe) wins over the generic one.

A family's rules read a log once the log (or ``--server``) says which family
wrote it. A rule whose wording no other server prints (vLLM's "Engine core
initialization failed", SGLang's "Not enough memory. Please try to increase
--mem-fraction-static") says ``gated = false``: it also reads the lines of a
log whose family is still unknown (a window pasted without the banner).
Wordings that could collide with another server's stay gated.

A cause rule with a ``frame`` pattern reads an exception by where it was
raised: ``pattern`` searches the exception line, ``frame`` the innermost frame
of its traceback (``File "…/vllm/config.py", line 9, in __post_init__``). It
speaks only for exceptions no rule names a cause for from their own words: a
``ValueError`` raised while checking the configuration is a rejected argument,
whatever its message says. One that ``narrows`` a message rule (``missing-module``)
takes the exceptions that rule reads where it also reads where they were raised:
a plugin importing a vLLM module its vLLM lacks is no missing install but two
versions made for others.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from .._exceptions import RuleError

KINDS = ("ready", "phase", "progress", "heartbeat", "fatal", "cause", "benign", "config", "stopping", "stopped",
         "last_words")
CAUSES = (
    "cuda_oom", "host_oom", "kv_cache_too_small", "cudnn_version", "arch_unsupported",
    "driver_mismatch", "gpu_unavailable", "undefined_symbol", "version_mismatch",
    "missing_shared_lib", "missing_module", "nccl", "port_in_use", "model_not_found",
    "corrupt_checkpoint", "trust_remote_code", "unsupported_arch", "bad_argument",
    "compile_error", "worker_died", "segfault", "warmup_failed", "time_limit", "node_failure",
    "scheduler_rejected", "other",
)
# The order in which a server goes through start-up; "serving" comes after ready.
# "queued": a scheduler's job waiting for its nodes.
PHASES = ("queued", "init", "dist_init", "weights", "kv_cache", "compile", "cuda_graphs", "warmup", "http", "serving")
FAMILIES = ("sglang", "vllm", "llamacpp", "tgi", "trtllm", "lmdeploy", "transformers")
CONFIG_FORMATS = ("kwargs", "dict", "rust", "kv")


@dataclass(frozen=True)
class Rule:
    id: str
    family: str  # a name from FAMILIES, or "generic"
    kind: str
    pattern: re.Pattern
    index: int  # priority: lower wins
    cause: str | None = None
    explanation: str = ""
    remedy: str = ""
    # the remedy in one family's own settings, where the server that failed is known (a
    # generic cause's remedy names SGLang's and vLLM's flags; llama-server has others)
    remedies: tuple[tuple[str, str], ...] = ()
    phase: str | None = None
    format: str | None = None  # how a config rule's "body" group is written
    start: bool = False  # the line a server prints once when it starts
    # A start line that begins a new run only after the last one ended (stopped,
    # went down, failed): the same line also comes while serving (transformers
    # serve loads a model not named at start at the first request for it).
    start_after_end: bool = False
    ends: bool = False  # a stopping line saying the server's process has finished: its run is over
    before_bind: bool = False  # a ready line printed before the port is bound
    # The cause says how a process died, not why (an abort, a SIGKILL, a dead
    # worker): an earlier error, or a cause line nearby, is the root.
    consequence: bool = False
    # The line where its cause arose (NCCL's WARN at the call that failed): a root
    # of the same cause after it, which says only that it failed, gives it the evidence.
    arose: bool = False
    # An exception its handler turns into one that says the same failure in its own
    # words (requests' HTTPError under the hub client, which raises GatedRepoError):
    # the root only where the log shows no exception naming a root cause after it.
    translated: bool = False
    # A frame of a native crash's stack that names the library it died in: the
    # cause of a segfault or abort just above it.
    stack: bool = False
    stop_when_ready: bool = False  # a fatal (or benign) line that, once the server is ready, is a stop (a time limit)
    # A fatal line that, written after a stop from outside before ready, reports
    # what happened before the stop (Slurm's count of a step's OOM kills, printed
    # as the step ends): the start failed, the stop only ended it.
    after_stop: bool = False
    # A fatal line only until ready: once serving, what it says failed was asked
    # for by a request (a model loaded through Triton's model control API), and
    # the server goes on.
    until_ready: bool = False
    # A ready line that proves the server serves (a request it answered 200),
    # not where it came up: the last ``up`` line before it is the evidence. On a
    # benign line (an access line's 500): the server answered a request with an error.
    served: bool = False
    up: bool = False  # the server says its HTTP server is up (uvicorn's "Application startup complete.")
    # An ``up`` line after which the server runs its own warm-up request, its ready
    # line coming only after that (SGLang): silence after it is not up.
    warmup_follows: bool = False
    # A heartbeat that says a process waits on another (a build lock another rank
    # holds): a finished log that ends on such lines in its warm-up had not
    # finished warming up, and where it stopped is the wait.
    waiting: bool = False
    # The end of an offline run's batch (no HTTP server, no ready line): its engine
    # was up; the evidence is the last start-up line before it.
    offline: bool = False
    # An offline engine's start (vllm.LLM and sgl.Engine in a notebook print no HTTP server):
    # ``engine_start``: its own configuration, where the engine began; ``engine_up``: its
    # word that it finished starting; ``frontend``: a line only an HTTP front end prints
    # ("vLLM API server version"), which says the log is a server's, not an offline engine's.
    engine_start: bool = False
    engine_up: bool = False
    frontend: bool = False
    # The writer (a line's origin) that only an HTTP front end's process is, from the
    # pack's ``frontend_origin``: any of its rules' lines from that writer is a ``frontend`` line.
    frontend_origin: re.Pattern | None = None
    # A line that begins a request's error (uvicorn's "Exception in ASGI
    # application"): the failures after it are that request's, which the server
    # survives. A window of nothing else is a server that takes requests.
    request: bool = False
    # A ready line that means ready only once a line of one of these rules was read (llama.cpp's
    # "model loaded" after its early socket); before it, the listening line follows. Another
    # rule with it reads lines only after such a line (the engine's own start: its death is then in the log).
    after: tuple[str, ...] | None = None
    gated: bool = True  # read only once the log's family is known to be the rule's
    frame: re.Pattern | None = None  # the innermost frame of the exception's traceback (cause rules only)
    narrows: tuple[str, ...] = ()  # message rules whose exceptions this frame rule takes where its frame matches
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pack:
    family: str
    detect: tuple[re.Pattern, ...]  # lines that show a log comes from this family
    command: tuple[re.Pattern, ...]  # command lines that start this family's server
    health: str | None  # the HTTP path that answers 200 once ready
    health_ready: bool = True  # whether that 200 alone means ready (not for SGLang 0.4: 200 before warm-up)
    # lines that show this family unless another family's detect line shows
    # later: other servers print them too (a library they load: its logger, its paths)
    detect_weak: tuple[re.Pattern, ...] = ()
    default_port: int | None = None
    rules: tuple[Rule, ...] = field(default=())


@dataclass(frozen=True)
class RuleSet:
    packs: dict[str, Pack]
    rules: tuple[Rule, ...]  # every rule, in priority order

    def rule(self, rule_id: str) -> Rule:
        """The rule of that id (ids are unique across packs)."""
        return next(r for r in self.rules if r.id == rule_id)

    def detect_command(self, argv: list[str]) -> str | None:
        line = " ".join(argv)
        for pack in self.packs.values():
            if any(p.search(line) for p in pack.command):
                return pack.family
        return None


def _compile(pattern: str, where: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise RuleError(f"{where}: bad pattern {pattern!r}: {e}") from None


def _load_pack(name: str, text: str, start_index: int) -> Pack:
    data = tomllib.loads(text)
    family = data.get("family")
    if family != name:
        raise RuleError(f"{name}.toml: family must be {name!r}, not {family!r}")
    frontend_origin = data.get("frontend_origin")
    frontend_origin = _compile(frontend_origin, f"{name}.toml frontend_origin") if frontend_origin else None
    rules = []
    for i, raw in enumerate(data.get("rule", [])):
        rid = raw.get("id") or f"{name}#{i}"
        where = f"{name}.toml rule {rid}"
        unknown = set(raw) - {"id", "kind", "pattern", "cause", "explanation", "remedy", "remedies",
                              "phase", "format", "start", "start_after_end", "ends", "before_bind", "consequence",
                              "arose", "translated", "stack", "stop_when_ready", "after_stop", "gated", "frame",
                              "examples", "served", "up", "after", "request", "offline", "until_ready",
                              "warmup_follows", "waiting", "engine_start", "engine_up", "frontend", "narrows"}
        if unknown:
            raise RuleError(f"{where}: unknown keys {sorted(unknown)}")
        kind = raw.get("kind")
        if kind not in KINDS:
            raise RuleError(f"{where}: kind must be one of {KINDS}, not {kind!r}")
        cause = raw.get("cause")
        if cause is not None and cause not in CAUSES:
            raise RuleError(f"{where}: unknown cause {cause!r}")
        if kind == "cause" and cause is None:
            raise RuleError(f"{where}: a cause rule needs a cause")
        if cause and not (raw.get("explanation") and raw.get("remedy")):
            raise RuleError(f"{where}: a rule naming a cause needs an explanation and a remedy")
        phase = raw.get("phase")
        if phase is not None and phase not in PHASES:
            raise RuleError(f"{where}: unknown phase {phase!r}")
        if kind == "phase" and phase is None:
            raise RuleError(f"{where}: a phase rule needs a phase")
        fmt = raw.get("format")
        if fmt is not None and fmt not in CONFIG_FORMATS:
            raise RuleError(f"{where}: unknown config format {fmt!r}")
        frame = raw.get("frame")
        if frame is not None and kind != "cause":
            raise RuleError(f"{where}: only a cause rule reads frames")
        narrows = tuple(raw.get("narrows", ()))
        if narrows and frame is None:
            raise RuleError(f"{where}: only a frame rule narrows another")
        if raw.get("waiting") and kind != "heartbeat":
            raise RuleError(f"{where}: only a heartbeat says a process waits")
        after = raw.get("after")
        after = (after,) if isinstance(after, str) else tuple(after) if after is not None else None
        if after is not None and not set(after) <= {r.get("id") for r in data.get("rule", [])}:
            raise RuleError(f"{where}: a rule waits only for rules of its own pack")
        remedies = raw.get("remedies", {})
        if not isinstance(remedies, dict) or not set(remedies) <= set(FAMILIES) \
                or not all(isinstance(v, str) and v.strip() for v in remedies.values()):
            raise RuleError(f"{where}: remedies must map families ({', '.join(FAMILIES)}) to a remedy each")
        if remedies and not raw.get("remedy"):
            raise RuleError(f"{where}: a rule with family remedies needs a remedy for the others")
        examples = tuple(raw.get("examples", ()))
        if not examples:
            raise RuleError(f"{where}: every rule needs at least one example line")
        rules.append(Rule(
            id=rid, family=name, kind=kind, pattern=_compile(raw["pattern"], where),
            index=start_index + i, cause=cause, explanation=raw.get("explanation", "").strip(),
            remedy=raw.get("remedy", "").strip(), remedies=tuple(sorted((k, v.strip()) for k, v in remedies.items())),
            phase=phase, format=fmt,
            start=bool(raw.get("start", False)) or bool(raw.get("start_after_end", False)),
            start_after_end=bool(raw.get("start_after_end", False)), ends=bool(raw.get("ends", False)),
            before_bind=bool(raw.get("before_bind", False)),
            consequence=bool(raw.get("consequence", False)), arose=bool(raw.get("arose", False)),
            translated=bool(raw.get("translated", False)),
            stack=bool(raw.get("stack", False)),
            stop_when_ready=bool(raw.get("stop_when_ready", False)),
            after_stop=bool(raw.get("after_stop", False)),
            until_ready=bool(raw.get("until_ready", False)),
            served=bool(raw.get("served", False)), up=bool(raw.get("up", False)), after=after,
            warmup_follows=bool(raw.get("warmup_follows", False)),
            waiting=bool(raw.get("waiting", False)),
            request=bool(raw.get("request", False)), offline=bool(raw.get("offline", False)),
            engine_start=bool(raw.get("engine_start", False)), engine_up=bool(raw.get("engine_up", False)),
            frontend=bool(raw.get("frontend", False)), frontend_origin=frontend_origin,
            gated=bool(raw.get("gated", True)),
            frame=_compile(frame, where) if frame is not None else None,
            narrows=narrows, examples=examples,
        ))
    return Pack(
        family=name,
        detect=tuple(_compile(p, f"{name}.toml detect") for p in data.get("detect", ())),
        command=tuple(_compile(p, f"{name}.toml command") for p in data.get("command", ())),
        health=data.get("health"),
        health_ready=data.get("health_ready", True),
        detect_weak=tuple(_compile(p, f"{name}.toml detect_weak") for p in data.get("detect_weak", ())),
        default_port=data.get("default_port"),
        rules=tuple(rules),
    )


@cache
def load() -> RuleSet:
    """Load every pack shipped with firedup, server families first, generic last."""
    base = resources.files(__package__)
    return _assemble({name: base.joinpath(f"{name}.toml").read_text("utf-8") for name in (*FAMILIES, "generic")})


def _assemble(texts: dict[str, str]) -> RuleSet:
    """One RuleSet of the packs' TOML texts, in their order: what holds across packs is checked here."""
    packs: dict[str, Pack] = {}
    rules: list[Rule] = []
    for name, text in texts.items():
        pack = _load_pack(name, text, len(rules))
        packs[name] = pack
        rules.extend(pack.rules)
    ids = [r.id for r in rules]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise RuleError(f"duplicate rule ids: {sorted(dupes)}")
    causes = {r.id for r in rules if r.cause and r.frame is None}
    for r in rules:
        if stray := sorted(set(r.narrows) - causes):
            raise RuleError(f"rule {r.id}: narrows only message rules naming a cause, not {stray}")
    return RuleSet(packs=packs, rules=tuple(rules))
