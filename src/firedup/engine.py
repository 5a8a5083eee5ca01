"""The rules engine: bytes in, signals out.

It finds candidate lines with the scanner, parses them (``lines``), feeds
traceback blocks (``tracebacks``), works out the server family, and lets the
first rule in priority order that matches a line speak for it.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field, replace
from typing import Any

from . import lines, rules, server_config, tracebacks
from .rules import Rule, RuleSet
from .scanner import Prefilter, Scanner, prefilter_pattern
from .signals import Signal

# Lines read while the family is unknown are held back this long for it to show.
HOLD_LINES = 2000
# A configuration printed over many lines (Rust's {:#?}) is read this far at most.
BLOCK_LINES = 500

_PREFILTERS: dict[tuple[int, bool, int], Prefilter] = {}
# Once a server is ready only these can still change the verdict or explain it.
_AFTER_READY = ("fatal", "cause", "benign", "stopped", "stopping")
# Benign lines after ready only fill the verdict's list of ignored lines (the
# judge keeps 50): after this many the prefilter leaves benign rules out.
BENIGN_AFTER_READY = 200
# Lines at these levels, outside a traceback and not heartbeats or shutdown
# lines, show a server going on after an exception it logged.
_CALM_LEVELS = ("INFO", "DEBUG")
# Rules whose reading of one of a log's last lines says the server was going on
# (or what else the line is), not dying: the last words stop there.
_GOING_ON = ("ready", "phase", "progress", "heartbeat", "benign", "config", "stopping", "stopped")
# What follows a progress bar's rate on the same line: another process's line
# glued to a redraw that ended with no newline ("... 7/23 [00:56<00:51,
# 3.20s/it][host:345:0:4945] Caught signal 11 (Segmentation fault ...)").
_GLUED = re.compile(r"[^\]\n]*\](?P<rest>.*\S.*)$")
# A line that says it is a warning where the prefixes parsed no level:
# "[WARNING] ...", "warning: ...", Python logging's "name - WARNING - ...".
_WARNING_MARK = re.compile(r"(?i)^\W{0,3}warn(?:ing)?\b|\s-\sWARNING\s-\s")
# multiprocessing's line above a child's traceback: "Process EngineCore:", "Process SpawnProcess-1:"
_PROCESS_HEADER = re.compile(r"Process [\w.-]+:")
# the rule IPython draws above a traceback in a notebook's output
_IPYTHON_RULE = re.compile(r"-{20,}")
_BARE_ASSERT = re.compile(r"(?:\w+\.)*AssertionError:?\s*$")
# pydantic's ValidationError: its line names the model, the indented lines under
# it each field's error ("  Value error, max_batch_size [2048] is greater than ...").
_PYDANTIC = re.compile(r"\bValidationError: \d+ validation errors? for ")
_PYDANTIC_ERROR = re.compile(r"\s*(?:Value error|Assertion failed|Input should be|Field required"
                             r"|Extra inputs are not permitted)\b")
# A line inside what an earlier line began: indented, a closing bracket, empty after its prefix.
_CONTINUATION = re.compile(r"\s|[\]\)\}]+[,;]?\s*$|$")
# How far back the last line that said something is looked for.
SAID_LINES = 200
# A health check's request logged by the server (firedup's own probes, a load
# balancer's, Kubernetes'): the same every few seconds whatever the server is
# doing, so no sign of progress. Uvicorn's and Python's http.server's access
# lines (and http.server's "code 404, message ..." before them), llama-server's.
_PROBE_ECHO = re.compile(rb'"(?:GET|HEAD) /(?:health\w*|v1/health/\w+|v1/models|models|get_model_info|metrics|ping|'
                         rb'ready|live|props)\b[^"]*" \d{3}\b|\bcode \d{3}, message |request: (?:GET|HEAD) '
                         rb'/(?:health|v1/models|models|metrics|props|slots)\b')
# A batch of lines longer than this is not checked for repeating the line before it.
REPEAT_LINES = 20
# A log pasted indented as a whole (a markdown code block): the indent of its
# first line, unless that line is itself part of a stack (a frame, a caret
# line: a window that starts inside a traceback). Python prints a frame two
# spaces in: a first line that is a frame further in was pasted with the rest
# as the indent. (A quote's "> " is a prefix: lines.parse.)
_INDENT = re.compile(r"[ \t]+(?=  File \")|[ \t]+(?!File \"|at |[\^~]|\S*Error\b)(?=\S)")
# An indented exception line gives no indent to take (a chained one may be indented
# in a plain log): as a paste's first line, it leaves the next line to decide.
_NO_INDENT_TO_TAKE = re.compile(r"[ \t]+\S*Error\b")


def _prefilter(ruleset: RuleSet, detect: bool, ready: int) -> Prefilter:
    """The compiled prefilter for a stage of reading, one per rule set and stage.

    Each pattern's tag is its rule, a (family, weak, pattern) triple (a detect pattern,
    while the family is unknown or was found from a weak detect line) or None
    (traceback shapes). After ready (``ready`` 1), the rules that follow
    start-up (phases, progress, heartbeats, request stats) are left out, so
    request traffic costs nothing but the scan; once enough benign lines were
    read after ready (``ready`` 2), the benign rules too."""
    key = (id(ruleset), detect, ready)
    if key not in _PREFILTERS:
        pairs: list[tuple[str, Any]] = [
            (rule.pattern.pattern, rule) for rule in ruleset.rules
            if rule.frame is None and rule.kind != "last_words"  # these read exceptions / a log's end, not lines
            and (not ready or rule.start or rule.stop_when_ready
                 or (rule.kind in _AFTER_READY and not (ready == 2 and rule.kind == "benign")))
        ]
        if detect:
            # a detect pattern's tag keeps it as the prefilter reads it (a message anywhere in
            # the line), to confirm what hyperscan's prefilter mode only approximates (a lookaround)
            pairs += [(p.pattern, (pack.family, weak, re.compile(prefilter_pattern(p.pattern).decode(), re.MULTILINE)))
                      for pack in ruleset.packs.values()
                      for weak, patterns in ((False, pack.detect), (True, pack.detect_weak)) for p in patterns]
        pairs += [(p, None) for p in tracebacks.PREFILTER]
        _PREFILTERS[key] = Prefilter([p for p, _ in pairs], [t for _, t in pairs])
    return _PREFILTERS[key]


@dataclass
class _Block:
    """A configuration printed over many lines, read until its closing brace."""
    rule: Rule
    lineno: int
    line: lines.Line
    captures: dict[str, Any]
    texts: list[str] = field(default_factory=list)


class Engine:
    def __init__(self, ruleset: RuleSet | None = None, server: str | None = None):
        self.ruleset = ruleset or rules.load()
        if server is not None and server not in self.ruleset.packs:
            raise ValueError(f"unknown server {server!r}")
        self.family = server
        self._weak = False  # the family was found from a line other servers print too
        self._benign_after_ready = 0
        self._weak_until = 0  # ... and another family's detect line may still show until this line
        self._ready = False
        self.scanner = Scanner(self._stage())
        self.tracebacks = tracebacks.Assembler()
        self._cause_rules = [r for r in self.ruleset.rules if r.cause and r.frame is None]
        self._frame_rules = [r for r in self.ruleset.rules if r.frame is not None]
        self._narrowed = {n for r in self._frame_rules for n in r.narrows}
        self._progress_rules = [r for r in self.ruleset.rules if r.kind == "progress"]
        self._stopping_rules = [r for r in self.ruleset.rules if r.kind == "stopping"]
        self._benign_rules = [r for r in self.ruleset.rules if r.kind == "benign"]
        self._line_rules = [r for r in self.ruleset.rules if r.frame is None]
        self._peeked: bytes | None = None
        self._stop_before: dict[int, tuple[int, str]] = {}  # a stop line's number → the line before the stop
        self._held: list[tuple[int, lines.Line, list[Rule], list[Signal], bool]] = []
        self._block: _Block | None = None  # an open multi-line configuration
        self._last_heartbeat = 0  # line number of the last heartbeat read
        self._read_ids: set[str] = set()  # the rules that read a line so far (a ready line may wait for one)
        self._said: tuple[int, str] | None = None  # the last line that said something itself (_last_said)
        self._message: str | None = None  # the last line's message (_repeated)
        self._indent: str | None = None  # the whole log's indent; "" once a line lacks it (None: no line yet)

    def feed(self, data: bytes) -> list[Signal]:
        return self._run(self.scanner.feed(data))

    def peek(self) -> list[Signal]:
        """The progress an unfinished redraw shows, now rather than when the
        next redraw ends it (for a live view; the finished line is read as
        usual, so the same state may come twice)."""
        redraw = self.scanner.redraw
        if redraw is None or redraw == self._peeked:
            return []
        self._peeked = redraw
        line = self._parse(redraw.decode("utf-8", "replace"))
        found = self._match(line, self._progress_rules)
        if found is None:
            return []
        return [self._signal(found[0], found[1].groupdict(), self.scanner.lineno, line)]

    def close(self) -> list[Signal]:
        """End of input: flush the partial last line, held lines and open
        tracebacks, then read the log's last words."""
        out = self._flush(self.scanner.close())
        return out + self._last_words()

    def _last_words(self) -> list[Signal]:
        """The first error-looking line of the burst a log ends on: the lines
        after the last one where the server said something calm (an INFO,
        DEBUG or WARNING record, a line a rule reads as start-up, progress or
        a known harmless message). A line a cause rule reads there names its
        cause; one only a ``last_words`` rule reads names none. A log ending
        on such lines died of something no fatal rule knows (a SYCL error, a
        "Floating point exception"), where one that hangs ends on where it got."""
        found: Signal | None = None
        for lineno, raw in reversed(self.scanner.tail):
            line = self._parse(raw.decode("utf-8", "replace"))
            if line.level in (*_CALM_LEVELS, "WARNING") or _WARNING_MARK.search(line.message):
                if found is not None and lines.parse(found.line).message in line.text:
                    found = None  # a second handler's copy of this warning
                break
            if tracebacks.request_site(line.text):
                continue  # the OpenAI layer answering a request with an error: no server's last words
            hit = self._match(line, self._line_rules)
            if hit is None or hit[0].kind == "fatal":
                continue  # a stack frame, a dump; a fatal line is read already
            rule = hit[0]
            if rule.kind in _GOING_ON:
                break
            found = Signal("last_words", lineno, line.text, rule, line.origin,
                           explains=rule if rule.kind == "cause" else None, message=line.message, level=line.level)
        return [found] if found is not None else []

    def idle(self) -> list[Signal]:
        """The input went quiet: read now what waits for a next line that may
        never come. An open traceback closes (its exception reaches the judge),
        lines held back for the family are read, an unfinished last line is
        read as it stands (a progress redraw stays, its next state follows).
        Reading goes on afterwards as usual; line numbers do not move. The
        log's last words so far come too: should it stay silent, the judge
        judges by them (a log watched alone, its writer dead)."""
        return self._flush(self.scanner.flush()) + self._last_words()

    def _flush(self, segments) -> list[Signal]:
        out = self._run(segments)
        self._release(out)
        self._close_block(out)
        out += self._attach(self.tracebacks.close())
        return out

    def _run(self, segments) -> list[Signal]:
        out: list[Signal] = []
        before = self.scanner.lines
        heartbeats = 0
        for lineno, segment, tags in segments:
            heartbeats += self._line(lineno, segment, tags, out) or bool(_PROBE_ECHO.search(segment))
        new = self.scanner.lines - before
        if new and self.scanner.last is not None:
            lineno, raw = self.scanner.last
            last = self._parse(raw.decode("utf-8", "replace"))
            calm = (last.level in _CALM_LEVELS and not self.tracebacks.open and lineno != self._last_heartbeat
                    and not any(r.pattern.search(last.message) for r in self._stopping_rules))
            self._said = self._last_said(lineno, last)
            repeated = self._repeated(new, last.message)
            out.append(Signal("lines", lineno, last.text, data={"n": new, "heartbeats": heartbeats, "calm": calm,
                                                                "said": self._said, "repeated": repeated,
                                                                "midway": self.tracebacks.midway}))
        return out

    def _repeated(self, new: int, message: str) -> bool:
        """Whether the lines just read only repeat, word for word, the line
        before them (a wrapper's retry loop printing "waiting for ..." each
        second): the same words again are no sign of progress."""
        before, self._message = self._message, message
        if before is None or new > REPEAT_LINES:
            return False
        return all(self._parse(raw.decode("utf-8", "replace")).message == before
                   for _, raw in itertools.islice(self.scanner.back(), new))

    def _last_said(self, lineno: int, last: lines.Line) -> tuple[int, str] | None:
        """The last line that says something itself, not a line inside what
        an earlier one began (a dump's indented lines, its closing brace): where
        a start that goes silent had got. None when none is near the end."""
        if not _CONTINUATION.match(last.message):
            return lineno, last.text
        walked = 0
        for walked, (n, raw) in enumerate(itertools.islice(self.scanner.back(), 1, SAID_LINES), 1):
            line = self._parse(raw.decode("utf-8", "replace"))
            if not _CONTINUATION.match(line.message):
                return n, line.text
        return self._said if walked < SAID_LINES - 1 else None  # the region began inside: an earlier one said it

    def _stage(self) -> Prefilter:
        ready = 0 if not self._ready else 2 if self._benign_after_ready >= BENIGN_AFTER_READY else 1
        return _prefilter(self.ruleset, detect=self.family is None or self._weak, ready=ready)

    def _parse(self, raw: str) -> lines.Line:
        """One raw line as rules read it; a structured record, as the last line
        it stands for (what a log ending on it last said)."""
        plain = lines.record_lines(raw)
        line = self._unindent(lines.parse(plain[-1] if plain else raw))
        return line._replace(text=lines.clean(raw)) if plain else line

    def _unindent(self, line: lines.Line) -> lines.Line:
        """A line as rules read it: without the indent of a log pasted indented
        (under the prefixes a machine that relays it adds)."""
        if self._indent and line.message.startswith(self._indent):
            inner = lines.parse(line.message[len(self._indent):])
            return lines.Line(line.text, inner.message, inner.origin or line.origin, inner.level or line.level,
                              line.outer or inner.outer)
        return line

    def _line(self, lineno: int, segment: bytes, tags: list[Any], out: list[Signal], record: str = "") -> int:
        text = segment.decode("utf-8", "replace")
        if not record:
            plain = lines.record_lines(text)
            if plain is not None:
                # a structured record is read as the lines it stands for, each at the record's
                # line number, and shown as the record itself: the line the file holds. Its
                # other fields (a source file's path) may name the server: its first line says so.
                named = [tag for tag in tags if isinstance(tag, tuple)]
                return sum(self._line(lineno, piece.encode(), named * (n == 0) + self._tags(piece.encode()), out,
                                      record=lines.clean(text))
                           for n, piece in enumerate(plain))
        line = lines.parse(text)
        if record:
            line = line._replace(text=record)
        if self._indent is None and line.message.strip():
            indent = _INDENT.match(line.message)
            if indent is not None or not _NO_INDENT_TO_TAKE.match(line.message):
                self._indent = indent.group() if indent else ""
        elif self._indent and line.message.strip() not in ("", self._indent.strip()) \
                and not line.message.startswith(self._indent) and not self.scanner.after_carriage_return:
            # a line without it: the log was not pasted indented after all (not a progress bar's
            # redraw after a carriage return, which an indent added at each line's start misses)
            self._indent = ""
        line = self._unindent(line)
        if self._block is not None and self._extend_block(line, out):
            return 0
        candidates: list[Rule] = []
        if self._weak and lineno > self._weak_until:
            self._settle_family()  # no other family showed: the weak line was right
        for tag in tags:
            if isinstance(tag, Rule):
                candidates.append(tag)
            elif isinstance(tag, tuple) and (self.family is None or (self._weak and not tag[1])) \
                    and tag[2].search(record or text):
                # the first detect line names the family; a weak one gives way to a
                # strong one, of another family or (confirming it) of its own
                if tag[0] == self.family:
                    self._settle_family()
                    continue
                replaces, (self.family, self._weak) = self.family, tag[:2]
                self._weak_until = lineno + HOLD_LINES
                self.scanner.prefilter = self._stage()
                out.append(Signal("detect", lineno, line.text, data={"server": self.family, "replaces": replaces}))
        if candidates and self._benign_after_ready >= BENIGN_AFTER_READY:
            # The prefilter no longer tags benign lines, but a benign rule ranked
            # above a line's other rules still reads it first (a retry that names
            # a missing repo is not model_not_found): only lines other rules
            # tagged pay for these searches.
            first = min(r.index for r in candidates)
            candidates += [r for r in self._benign_rules if r.index < first]
        closed = self.tracebacks.feed(lineno, line)
        self._note_line_before(lineno, tags)
        self.scanner.dense = self.tracebacks.open or self._block is not None
        if self.tracebacks.absorbed:
            candidates = []  # a frame's source line is code, not a message
        held = (lineno, line, candidates, closed, self.tracebacks.consumed)
        if self.family is None and len(self._held) < HOLD_LINES:
            # Which family wrote the log is often said a few lines later
            # (TGI's panic comes before the launcher's lines): wait for it.
            self._held.append(held)
            return 0
        self._release(out)
        return self._read(*held, out)

    def _tags(self, segment: bytes) -> list[Any]:
        """What the prefilter tags a line with, for a line the scanner did not
        cut from the input (one line of a structured record's message)."""
        prefilter = self.scanner.prefilter
        return list(dict.fromkeys(prefilter.tags[pid] for _, pid in prefilter.scan(segment)))

    def _note_line_before(self, lineno: int, tags: list[Any]) -> None:
        """Where a start had got when a stop came: the line before the stop's
        line, or before the traceback it ends ("^C" then KeyboardInterrupt's
        frames). Read as the lines pass: the scanner keeps no others."""
        block = self.tracebacks.block
        if block is not None and block.lineno == lineno:
            block.before = self._line_before()
        if any(isinstance(tag, Rule) and tag.kind == "stopped" for tag in tags):
            before = block.before if block is not None else self._line_before()
            if before is not None:
                self._stop_before[lineno] = before

    def _line_before(self) -> tuple[int, str] | None:
        echoed = None  # an indented line: the source line Python echoes under a warning, if one is above it
        for lineno, raw in itertools.islice(self.scanner.lines_before(), 4):
            line = lines.parse(raw.decode("utf-8", "replace"))
            if _PROCESS_HEADER.fullmatch(line.message) or _IPYTHON_RULE.fullmatch(line.message):
                continue  # the traceback's own first line
            if lines.PY_WARNING.search(line.message):  # a warning an import printed, not where the start had got
                echoed = None
                continue
            if echoed is not None:
                return echoed
            if line.message[:1].isspace():
                echoed = lineno, line.text
                continue
            return lineno, line.text
        return echoed

    def _settle_family(self) -> None:
        """Stop looking for another family (detect lines no longer scanned)."""
        self._weak = False
        self.scanner.prefilter = self._stage()

    def _release(self, out: list[Signal]) -> None:
        held, self._held = self._held, []
        for item in held:
            self._read(*item, out)

    def _read(self, lineno: int, line: lines.Line, candidates: list[Rule], closed: list[Signal],
              in_block: bool, out: list[Signal]) -> int:
        out += self._attach(closed)
        before = self._stop_before.pop(lineno, None)
        found = self._match(line, sorted(set(candidates), key=lambda r: r.index))
        if found is None:
            return 0
        rule, m = found
        self._read_ids.add(rule.id)
        signal = self._signal(rule, m.groupdict(), lineno, line)
        if rule.after is not None and self._read_ids.isdisjoint(rule.after):
            signal = replace(signal, kind="phase")  # ready only after that line: before it, the listening line follows
        if rule.kind == "stopped" and before is not None:
            signal.data["before"] = before
        if rule.kind == "fatal" and line.level == "WARNING":
            # a fatal wording logged as a warning was handled: it names a cause, decides nothing
            signal = replace(signal, kind="cause" if rule.cause else "benign")
        if signal.kind == "fatal":
            # another worker's traceback still open above this line, its exception read:
            # the judge may decide on this line at once, so it gets that exception first
            out += self._attach(self.tracebacks.close_answered(lineno))
        elif rule.start:
            # a run begins (a restart appended to the log): the run before's tracebacks, their
            # exceptions read, are its own, and the judge gets them before this line ends that run
            out += self._attach(self.tracebacks.close_answered(lineno))
        if signal.kind == "fatal" and rule.cause is None:
            signal = replace(signal, explains=self._cause_of(line))
        elif rule.kind == "benign" and in_block:
            return 0  # frames of a traceback are not warnings
        if signal.kind == "ready" or rule.start:
            self._ready = signal.kind == "ready"
            self._benign_after_ready = 0
            self.scanner.prefilter = self._stage()
        elif rule.kind == "benign" and self._ready:
            self._benign_after_ready += 1
            if self._benign_after_ready == BENIGN_AFTER_READY:
                self.scanner.prefilter = self._stage()
        if rule.kind == "config" and rule.format == "rust" and line.text.endswith("{"):
            # pretty-printed: the fields follow, one a line, up to a lone "}"
            self._block = _Block(rule, lineno, line, m.groupdict())
            self.scanner.dense = True
            return 0
        out.append(signal)
        if rule.kind == "progress":  # the bar came first: what is glued after it follows it
            self._read_glued(lineno, line, m, candidates, out)
        if rule.kind == "heartbeat":
            self._last_heartbeat = lineno
            return 1
        return 0

    def _read_glued(self, lineno: int, line: lines.Line, bar: re.Match, candidates: list[Rule],
                    out: list[Signal]) -> None:
        """Read the line glued after a progress bar (see _GLUED) as a line of its
        own; its signal keeps the whole line as written (the evidence)."""
        glued = _GLUED.match(bar.string, bar.end())
        if glued is not None:
            rest = lines.parse(glued["rest"])
            self._read(lineno, lines.Line(line.text, rest.message, rest.origin, rest.level),
                       [r for r in candidates if r.kind != "progress"], [], False, out)

    def _extend_block(self, line: lines.Line, out: list[Signal]) -> bool:
        """Take a line into the open multi-line configuration; False for a
        line that starts a new log record instead (the block was cut short)."""
        assert self._block is not None
        texts = self._block.texts
        if line.level:
            self._close_block(out)
            return False
        texts.append(line.text)
        if line.text.strip() == "}" or len(texts) >= BLOCK_LINES:
            self._close_block(out)
        return True

    def _close_block(self, out: list[Signal]) -> None:
        if self._block is None:
            return
        block, self._block = self._block, None
        self.scanner.dense = self.tracebacks.open
        body = "{" + (block.captures.get("body") or "") + "\n" + "\n".join(block.texts)
        out.append(self._signal(block.rule, {**block.captures, "body": body}, block.lineno, block.line))

    def _match(self, line: lines.Line, candidates) -> tuple[Rule, re.Match] | None:
        """The first rule in priority order that matches the line's message (or whole text).

        A family's rules apply once the log (or --server) says which family
        wrote it; until then only the generic pack and the rules whose
        wording is their family's alone (``gated = false``) read lines."""
        for rule in candidates:
            if not self._reads(rule):
                continue
            m = rule.pattern.search(line.message)
            if m is None and line.text is not line.message:
                m = rule.pattern.search(line.text)
            if m is not None:
                return rule, m
        return None

    def _reads(self, rule: Rule) -> bool:
        """Whether a rule reads this log: the generic pack's always, a family's
        once the log is known to be that family's (or, ungated, while no family is
        for sure: a weak detect line, vLLM's log format in SGLang 0.3's log, may give way).
        A rule other than a ready one with ``after`` reads only once a line of those rules was."""
        if rule.after is not None and rule.kind != "ready" and self._read_ids.isdisjoint(rule.after):
            return False
        return rule.family == "generic" or rule.family == self.family \
            or (not rule.gated and (self.family is None or self._weak))

    def _cause_of(self, line: lines.Line) -> Rule | None:
        """The first rule in priority order that names a cause and matches the line."""
        found = self._match(line, self._cause_rules)
        return found[0] if found else None

    def _attach(self, signals: list[Signal]) -> list[Signal]:
        """Give each exception the rule that names its cause: read from its own
        line, or else from an indented line that continues its message, which
        then becomes the evidence (also when its own line only says how it
        failed: pydantic's "1 validation error for ModelConfig" over the
        "Value error, ..." that says why), or else (a bare AssertionError) from
        the assert statement above it, or else from where it was raised."""
        out = []
        for s in signals:
            if s.kind == "exception":
                rule = self._cause_of(lines.Line(s.line, s.data["message"], s.origin, ""))
                pydantic = _PYDANTIC.search(s.data["message"])
                if rule is None or rule.consequence or pydantic:
                    for lineno, line in s.data.get("details", ()):
                        found = self._cause_of(line)
                        if found is not None and not found.consequence:
                            s = replace(s, lineno=lineno, line=line.text, message=line.message, level=line.level)
                            rule = found
                            break
                    else:
                        # pydantic's header says only which model failed; its first error says why
                        said = next(((n, d) for n, d in s.data.get("details", ()) if _PYDANTIC_ERROR.match(d.message)),
                                    None) if pydantic else None
                        if said is not None:
                            s = replace(s, lineno=said[0], line=said[1].text, message=said[1].message,
                                        level=said[1].level)
                statement = s.data.get("statement", "")
                if rule is None and _BARE_ASSERT.match(s.data["message"]) and statement.startswith("assert "):
                    # a bare AssertionError says what failed only in the assert its traceback shows
                    rule = self._cause_of(lines.Line(s.line, "AssertionError: " + statement, s.origin, ""))
                if rule is None or rule.id in self._narrowed:
                    rule = self._raised_at(s.data["message"], s.data.get("frame", ""), rule) or rule
                if rule is not None:
                    s = replace(s, explains=rule)
            out.append(s)
        return out

    def _raised_at(self, message: str, frame: str, read: Rule | None = None) -> Rule | None:
        """The first frame rule that reads the exception and where it was raised
        (one that narrows the rule that read its message, when one did)."""
        if not frame:
            return None
        for rule in self._frame_rules:
            if read is not None and read.id not in rule.narrows:
                continue
            if self._reads(rule) and rule.pattern.search(message) and rule.frame.search(frame):  # type: ignore[union-attr]
                return rule
        return None

    @staticmethod
    def _signal(rule: Rule, captures: dict[str, Any], lineno: int, line: lines.Line) -> Signal:
        data = {k: v for k, v in captures.items() if v is not None}
        if rule.kind == "config" and rule.format and "body" in data:
            body = data.pop("body")
            data = {**server_config.parse(body, rule.format), **data}
        elif rule.kind == "config" and "key" in data and "value" in data:  # a setting named by the line
            data = server_config.parse(f"{data.pop('key')}={data.pop('value')}", "kv")
        elif rule.kind == "progress":
            data["n"] = int(data.get("n", 0))
            data["total"] = int(data.get("total", 0))
            if data.get("desc"):
                data["desc"] = data["desc"].strip(" :")
        return Signal(rule.kind, lineno, line.text, rule, line.origin, data, message=line.message, level=line.level)
