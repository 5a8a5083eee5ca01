"""How well the rules read real logs they were not written against.

The reported corpus (tests/fixtures/reported/*.log with a .json label): the
logs of the first gathering are sorted by the date each was posted and the
newest quarter is held out (--set held-out / older); each later batch (a
sidecar's "gathered" date) is a set of its own, measured with the rules
frozen before the batch was looked at (--set gathered-DATE, or fresh for the
newest). Each --rules-from revision's rules (and code) read the corpus of the
working tree, so the same logs are measured with the rules as they were at
that revision:

    python benchmarks/generalization.py --rules-from 78446fb --rules-from WORKTREE --set fresh
    python benchmarks/generalization.py --rules-from WORKTREE --set older --misses
    python benchmarks/generalization.py --coverage

prints a markdown table (or, with --misses, the logs where the rules and the
label differ). With --windows, each ready log of the sets is cut as a user
pastes it, from a line in its middle on (its last 75, 50 and 25 % of lines:
no banner, no ready line, maybe inside a traceback), and the table says how
many such windows of a server that was up the rules call failed:

    python benchmarks/generalization.py --rules-from 95ffc3b --rules-from WORKTREE --set all --windows

With --tails N, each failed log is cut as an issue's excerpt often is: its
last N bytes (from a line start), kept where the cut still holds the label's
evidence line; the table scores those windows against the label (outcome,
cause, evidence), with the warm-up, the banner and the first copies of a
message left outside:

    python benchmarks/generalization.py --rules-from 981af22 --rules-from WORKTREE --set all --tails 2000

With --pasted, each log is dressed as it reaches a reader: quoted in a markdown
reply, indented in a code block, behind docker compose's, kubectl's, a node's container
log's, a wrapper's echo, journald's, srun -l's, pm2's or a log viewer's prefix, with Windows' line ends; the table
counts the dressed logs read as the plain log is (outcome and cause, and the
evidence line under its dressing):

    python benchmarks/generalization.py --rules-from d98874f --rules-from WORKTREE --set all --pasted
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "reported"
WORKTREE = "WORKTREE"

# Run in a child whose firedup is the revision's: prints one verdict a line.
DRIVER = """
import json, sys
try:
    from firedup._diagnose import diagnose
except ImportError:  # revisions before the module went private
    from firedup.diagnose import diagnose
for path in sys.argv[1:]:
    try:
        v = diagnose(path).to_dict()
    except Exception as e:  # refused as input (a window of a log cut inside a binary blob)
        v = {"outcome": f"refused: {e}", "cause": None, "evidence": None, "benign": []}
    print(json.dumps({"path": path, "outcome": v["outcome"], "cause": v["cause"],
                      "evidence": v["evidence"], "benign": [b["line"] for b in v["benign"]]}))
"""


def labelled(corpus: Path) -> list[tuple[Path, dict]]:
    """Every labelled log, oldest first (by posting date, then name)."""
    pairs = [(p, json.loads(p.with_suffix(".json").read_text())) for p in corpus.glob("*.log")
             if p.with_suffix(".json").exists()]
    return sorted(pairs, key=lambda pair: (pair[1]["date"], pair[0].name))


def split(pairs: list) -> dict[str, list]:
    """The date split runs over the logs of the first gathering; each later
    batch (a sidecar's ``gathered`` date) is a set of its own, ``fresh`` the
    newest: logs gathered after the rules were frozen, labelled before any
    rule read them."""
    first = [pair for pair in pairs if "gathered" not in pair[1]]
    cut = len(first) * 3 // 4
    parts = {"held-out": first[cut:], "older": first[:cut], "all": pairs}
    batches = sorted({pair[1]["gathered"] for pair in pairs if "gathered" in pair[1]})
    for batch in batches:
        parts[f"gathered-{batch}"] = [pair for pair in pairs if pair[1].get("gathered") == batch]
    if batches:
        parts["fresh"] = parts[f"gathered-{batches[-1]}"]
    return parts


def verdicts(rev: str, logs: list[Path]) -> dict[str, dict]:
    """Each log's verdict by the rules and code of a git revision (or the working tree)."""
    with tempfile.TemporaryDirectory() as tmp:
        if rev == WORKTREE:
            src = ROOT / "src"
        else:
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"],
                                     capture_output=True, check=True).stdout
            with tarfile.open(fileobj=BytesIO(archive)) as tar:
                tar.extractall(tmp, filter="data")
            src = Path(tmp) / "src"
        env = {**os.environ, "PYTHONPATH": str(src), "FIREDUP_LEDGER": str(Path(tmp) / "ledger.db")}
        run = subprocess.run([sys.executable, "-c", DRIVER, *map(str, logs)], env=env,
                             capture_output=True, text=True)
        if run.returncode:
            sys.exit(f"rules at {rev} could not read the corpus:\n{run.stderr[-2000:]}")
        out = run.stdout
    return {v["path"]: v for v in map(json.loads, out.splitlines())}


# Where a window of a ready log starts: the fraction of its lines cut from the head.
CUTS = (0.25, 0.5, 0.75)


def windows(pairs: list, into: Path) -> list[tuple[Path, Path, float]]:
    """Each ready log's windows (the log, the window's file, the fraction cut),
    written under ``into``; a window shorter than 3 lines is left out."""
    out = []
    for path, label in pairs:
        if label["outcome"] != "ready":
            continue
        lines = path.read_bytes().splitlines(keepends=True)
        for cut in CUTS:
            start = int(len(lines) * cut)
            if len(lines) - start < 3:
                continue
            window = into / f"{path.stem}.from-{int(cut * 100)}.log"
            window.write_bytes(b"".join(lines[start:]))
            out.append((path, window, cut))
    return out


def window_table(revs: list[str], pairs: list, misses: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cut = windows(pairs, Path(tmp))
        results = {rev: verdicts(rev, [w for _, w, _ in cut]) for rev in revs}
    if misses:
        for rev in revs:
            for path, window, at in cut:
                v = results[rev][str(window)]
                if v["outcome"] != "ready":
                    print(f"{rev} {path.name} from {int(at * 100)} %: {v['outcome']}, {v['cause']}: "
                          f"{(v['evidence'] or {}).get('line')!r}")
        return
    print("| windows of ready logs | " + " | ".join(f"rules at {rev if rev == WORKTREE else rev[:9]}"
                                                   for rev in revs) + " |")
    print("|---|" + "---|" * len(revs))
    for outcome in ("ready", "incomplete", "failed"):
        n = {rev: sum(v["outcome"] == outcome for v in results[rev].values()) for rev in revs}
        print(f"| {outcome} | " + " | ".join(cell(n[rev], len(cut)) for rev in revs) + " |")


# How a log reaches a reader: a prefix put before each of its lines that is not
# blank, or (None) its line ends turned into Windows' CRLF.
DRESSINGS: dict[str, bytes | None] = {
    "quoted (> )": b"> ",
    "indented (4 spaces)": b"    ",
    "indented with no-break spaces (a rendered page)": b"\xc2\xa0\xc2\xa0",
    "docker compose": b"vllm-1  | ",
    "kubectl --timestamps": b"2026-01-01T00:00:00.123456789Z ",
    "kubectl --prefix": b"[pod/vllm-7d9f8-abcde/vllm] ",
    "a node's container log (CRI)": b"2026-01-01T00:00:00.123456789Z stderr F ",
    "a wrapper's echo": b"vLLM STDERR: ",
    "journald": b"Dec 04 04:14:06 gpu-host-01 server[1234]: ",
    "srun -l (task number)": b"0: ",
    "pm2": b"0|vllm     | ",
    "log viewer (timestamp column)": b"2026-04-19 13:04:53.903 | ",
    "CRLF line ends": None,
}


def dress(text: bytes, prefix: bytes | None) -> bytes:
    if prefix is None:
        return text.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    return b"".join(prefix + line if line.strip() else line for line in text.splitlines(keepends=True))


def pasted_table(revs: list[str], pairs: list, misses_only: bool) -> None:
    logs = [path for path, _ in pairs]
    with tempfile.TemporaryDirectory() as tmp:
        dressed = {}
        for dressing, prefix in DRESSINGS.items():
            for n, path in enumerate(logs):
                copy = Path(tmp) / f"{n}-{len(dressed)}.log"
                copy.write_bytes(dress(path.read_bytes(), prefix))
                dressed[(dressing, path)] = copy
        results = {rev: verdicts(rev, logs + list(dressed.values())) for rev in revs}
    rows: dict[str, dict[str, list[int]]] = {d: {rev: [0, 0] for rev in revs} for d in DRESSINGS}
    for rev in revs:
        for (dressing, path), copy in dressed.items():
            plain, got = results[rev][str(path)], results[rev][str(copy)]
            same = (plain["outcome"], plain["cause"]) == (got["outcome"], got["cause"])
            line = (plain["evidence"] or {}).get("line") or ""
            same_line = ((got["evidence"] or {}).get("line") or "").endswith(line.strip())
            rows[dressing][rev][0] += same
            rows[dressing][rev][1] += same and same_line
            if misses_only and not (same and same_line):
                print(f"{rev} {dressing} {path.name}: {plain['outcome']}/{plain['cause']} -> "
                      f"{got['outcome']}/{got['cause']}; {(got['evidence'] or {}).get('line')!r}")
    if misses_only:
        return
    print("| dressed as | " + " | ".join(f"rules at {rev if rev == WORKTREE else rev[:9]}: verdict, and evidence"
                                        for rev in revs) + " |")
    print("|---|" + "---|" * len(revs))
    for dressing in DRESSINGS:
        print(f"| {dressing} | " + " | ".join(
            f"{cell(rows[dressing][rev][0], len(logs))}, {cell(rows[dressing][rev][1], len(logs))}"
            for rev in revs) + " |")


def tails(pairs: list, into: Path, size: int) -> list[tuple[Path, dict, Path]]:
    """Each failed log's last ``size`` bytes from a line start (the log, its
    label, the window's file), where that still holds the evidence line."""
    from firedup.lines import clean

    out = []
    for path, label in pairs:
        if label["outcome"] != "failed":
            continue
        data = path.read_bytes()
        if len(data) <= size:
            continue
        tail = data[-size:]
        tail = tail[tail.find(b"\n") + 1:]
        text = tail.decode("utf-8", "replace")
        if not any(clean(line) == clean(label["evidence_line"]) for line in text.splitlines()):
            continue
        window = into / f"{path.stem}.last-{size}.log"
        window.write_bytes(tail)
        out.append((path, label, window))
    return out


def tail_table(revs: list[str], pairs: list, size: int, misses_only: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cut = tails(pairs, Path(tmp), size)
        results = {rev: verdicts(rev, [w for _, _, w in cut]) for rev in revs}
    if misses_only:
        for rev in revs:
            for path, label, window in cut:
                wrong = misses(label, results[rev][str(window)])
                if wrong:
                    print(f"{rev} {path.name} last {size} bytes: {'; '.join(wrong)}")
        return
    print(f"| last {size} bytes of failed logs | " + " | ".join(
        f"rules at {rev if rev == WORKTREE else rev[:9]}" for rev in revs) + " |")
    print("|---|" + "---|" * len(revs))
    scores = {rev: score([(window, label) for _, label, window in cut], results[rev]) for rev in revs}
    for measure in ("outcome", "cause of failed logs", "evidence line"):
        print(f"| {measure} | " + " | ".join(cell(*scores[rev][measure]) for rev in revs) + " |")


def misses(label: dict, got: dict) -> list[str]:
    """What the verdict gets wrong, against the label (empty: it agrees)."""
    from firedup.lines import clean

    out = []
    want = ("stalled", "incomplete") if label["outcome"] == "hung" else (label["outcome"],)
    if got["outcome"] not in want:
        out.append(f"outcome {got['outcome']} (label {label['outcome']})")
    elif label["outcome"] == "failed" and got["cause"] != label["cause"]:
        out.append(f"cause {got['cause']} (label {label['cause']})")
    line = (got["evidence"] or {}).get("line")
    if line != clean(label["evidence_line"]):
        out.append(f"evidence {line!r}")
    return out


def score(pairs: list, got: dict[str, dict]) -> dict[str, tuple[int, int]]:
    from firedup.lines import clean

    rows = {"outcome": [0, 0], "cause of failed logs": [0, 0], "evidence line": [0, 0],
            "ready logs called failed": [0, 0]}
    for path, label in pairs:
        v = got[str(path)]
        want = ("stalled", "incomplete") if label["outcome"] == "hung" else (label["outcome"],)
        rows["outcome"][0] += v["outcome"] in want
        rows["outcome"][1] += 1
        if label["outcome"] == "failed":
            rows["cause of failed logs"][0] += v["outcome"] == "failed" and v["cause"] == label["cause"]
            rows["cause of failed logs"][1] += 1
        rows["evidence line"][0] += (v["evidence"] or {}).get("line") == clean(label["evidence_line"])
        rows["evidence line"][1] += 1
        if label["outcome"] == "ready":
            rows["ready logs called failed"][0] += v["outcome"] == "failed"
            rows["ready logs called failed"][1] += 1
    return {k: tuple(v) for k, v in rows.items()}


def cell(hit: int, n: int, *, bad: bool = False) -> str:
    if bad:
        return f"{hit} of {n}"
    return f"{hit}/{n} ({100 * hit / n:.0f} %)" if n else "-"


def coverage(pairs: list) -> None:
    """The tables of tests/fixtures/reported/README.md: logs by family and
    outcome, failed and hung logs by cause, and the batches."""
    from collections import Counter

    outcomes = ("ready", "failed", "hung")
    by = Counter((label["server"], label["outcome"]) for _, label in pairs)
    families = sorted({f for f, _ in by}, key=lambda f: -sum(by[f, o] for o in outcomes))
    print(f"{len(pairs)} labelled logs, posted {pairs[0][1]['date']} to {max(p[1]['date'] for p in pairs)}, "
          "by family and outcome:\n")
    print("| family | " + " | ".join(outcomes) + " | all |\n|---|" + "---:|" * (len(outcomes) + 1))
    for f in families:
        print(f"| {f} | " + " | ".join(str(by[f, o]) for o in outcomes) + f" | {sum(by[f, o] for o in outcomes)} |")
    print("| **all** | " + " | ".join(str(sum(by[f, o] for f in families)) for o in outcomes) + f" | {len(pairs)} |")
    causes = Counter(label["cause"] for _, label in pairs if label["outcome"] != "ready")
    print("\nFailed and hung logs by cause (hung: the phase it stalled in):\n\n| cause | logs |\n|---|---:|")
    for cause, n in sorted(causes.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"| `{cause}` | {n} |")
    batches = Counter(label.get("gathered", "first") for _, label in pairs)
    print("\nBatches (`gathered`): " + ", ".join(f"{b} {n}" for b, n in sorted(batches.items())) + ".")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rules-from", action="append", metavar="REV",
                    help=f"a git revision whose rules to measure, or {WORKTREE} (repeatable; "
                         f"default: 9bd04e9 and {WORKTREE})")
    ap.add_argument("--set", action="append", metavar="SET",
                    help="which part of the corpus: held-out, older, all, fresh (the newest gathered batch) or "
                         "gathered-DATE (repeatable; default: held-out and older)")
    ap.add_argument("--misses", action="store_true", help="list the logs the rules get wrong instead")
    ap.add_argument("--coverage", action="store_true",
                    help="print the corpus's coverage tables (family x outcome, causes) instead")
    ap.add_argument("--windows", action="store_true",
                    help="read windows of the ready logs (cut from the middle on) instead, counting those called "
                         "failed")
    ap.add_argument("--tails", type=int, metavar="BYTES",
                    help="read the last BYTES of each failed log instead (where they hold its evidence line), "
                         "scored against its label")
    ap.add_argument("--pasted", action="store_true",
                    help="read each log dressed as it is pasted (quoted, indented, behind a collector's prefix) "
                         "instead, counting those read as the plain log is")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    if args.coverage:
        coverage(labelled(args.corpus))
        return
    revs = args.rules_from or ["9bd04e9", WORKTREE]
    sets = args.set or ["held-out", "older"]
    parts = split(labelled(args.corpus))
    unknown = [name for name in sets if name not in parts]
    if unknown:
        ap.error(f"no such set: {', '.join(unknown)} (sets here: {', '.join(parts)})")
    if args.tails:
        chosen = {path: label for name in sets for path, label in parts[name]}
        tail_table(revs, sorted(chosen.items()), args.tails, args.misses)
        return
    if args.pasted:
        chosen = {path: label for name in sets for path, label in parts[name]}
        pasted_table(revs, sorted(chosen.items()), args.misses)
        return
    if args.windows:
        chosen = {path: label for name in sets for path, label in parts[name]}
        window_table(revs, sorted(chosen.items()), args.misses)
        return
    logs = [p for p, _ in parts["all"]]
    results = {rev: verdicts(rev, logs) for rev in revs}

    if args.misses:
        for rev in revs:
            for name in sets:
                for path, label in parts[name]:
                    wrong = misses(label, results[rev][str(path)])
                    if wrong:
                        print(f"{rev} {name} {path.name}: {'; '.join(wrong)}")
        return

    cols = [(rev, name) for rev in revs for name in sets]
    first = {name: parts[name][0][1]["date"] for name in sets}
    print("| measure | " + " | ".join(
        f"rules at {rev if rev == WORKTREE else rev[:9]}, {name} ({len(parts[name])} logs, from {first[name]})"
        for rev, name in cols) + " |")
    print("|---|" + "---|" * len(cols))
    scores = {(rev, name): score(parts[name], results[rev]) for rev, name in cols}
    for measure in scores[cols[0]]:
        bad = measure.startswith("ready logs called")
        print(f"| {measure} | " + " | ".join(cell(*scores[c][measure], bad=bad) for c in cols) + " |")


if __name__ == "__main__":
    main()
