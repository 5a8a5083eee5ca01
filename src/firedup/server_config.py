"""The configuration a server printed at start-up (not firedup's own): SGLang's ``ServerArgs(k=v, ...)``,
vLLM's ``{'k': v}`` and ``k=v, ...`` engine config, TGI's ``Args { k: v, ... }``
(on one line or pretty-printed over many),
and ``k = v | k = v`` lists."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

_OPEN, _CLOSE = "([{", ")]}"


def _split_top(text: str, seps: str) -> list[str]:
    """Split at separators that are outside brackets and quotes."""
    parts, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif c in seps and depth <= 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _value(raw: str) -> Any:
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return raw.strip('"')
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return raw
    return value


def _rust_value(raw: str) -> Any:
    """A value as Rust's Debug prints it: ``Some(x)``, ``true``, ``None``, over
    several lines when pretty-printed."""
    raw = " ".join(raw.split())
    inner = re.fullmatch(r"Some\(\s*(.*?),?\s*\)", raw)
    if inner:
        raw = inner.group(1)
    return {"true": True, "false": False}.get(raw, _value(raw))


def parse(body: str, fmt: str) -> dict[str, Any]:
    body = body.strip()
    if fmt == "dict":
        body = body.strip("{}")
    elif fmt == "rust":
        body = body[body.find("{") + 1:body.rfind("}")] if "{" in body else body
    seps, kv = {"kwargs": (",", "="), "dict": (",", ":"), "rust": (",", ":"), "kv": ("|,", "=")}[fmt]
    out: dict[str, Any] = {}
    for item in _split_top(body, seps):
        key, sep, raw = item.partition(kv)
        if not sep:
            continue
        key = key.strip().strip("'\"")
        if key.isidentifier() or key.replace("-", "_").replace(".", "_").isidentifier():
            out[key] = _rust_value(raw) if fmt == "rust" else _value(raw.strip())
    return out
