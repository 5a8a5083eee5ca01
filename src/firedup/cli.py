"""Command line: arguments in, API calls out."""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console

from . import __version__
from .diagnose import InputError, diagnose
from .rules import FAMILIES, RuleError
from .sinks import summary

USAGE_ERROR = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="firedup", description="Start, watch and diagnose LLM inference servers.")
    parser.add_argument("--version", action="version", version=f"firedup {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("diagnose", help="say what happened in a server log",
                       description="Read a server log and say what happened: ready, failed (with cause and remedy) "
                                   "or incomplete. Exit code: 0 ready, 1 failed, 2 bad input, 5 incomplete.")
    d.add_argument("file", help="the log file, or - for standard input")
    d.add_argument("--server", choices=(*FAMILIES, "generic"), help="server family (default: detect from the log)")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        verdict = diagnose(args.file, server=args.server)
    except (InputError, RuleError) as e:
        print(f"firedup: {e}", file=sys.stderr)
        return USAGE_ERROR
    if args.json:
        print(json.dumps(verdict.to_dict(), ensure_ascii=False))
    else:
        summary.render(verdict, Console(highlight=False), source="" if args.file == "-" else args.file)
    return verdict.code


def run() -> None:
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
