"""The Python API for test suites and scripts::

    with firedup.launch(["vllm", "serve", "m", "--port", "8001"]) as server:
        httpx.get(server.url + "/v1/models")

raises a ``ServerError`` subclass carrying the verdict when the server does
not become ready, and stops the server's process group on the way out."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from ._exceptions import ServerError
from ._launch import start_and_watch
from .defaults import STALL, STOP_GRACE
from .judge import Verdict
from .sources import pgroup


@dataclass
class Server:
    name: str
    pid: int
    url: str | None
    log: str
    verdict: Verdict

    def stop(self, grace: float = STOP_GRACE) -> str:
        return pgroup.stop_group(self.pid, grace)


@contextmanager
def launch(argv: Sequence[str], *, name: str | None = None, server: str | None = None,
           log: str | os.PathLike | None = None, url: str | None = None, stall: float | None = STALL,
           timeout: float | None = None, env: Mapping[str, str] | None = None,
           stop_grace: float = STOP_GRACE) -> Iterator[Server]:
    """Start a server, wait until it is ready, yield it, stop it afterwards."""
    launched = start_and_watch(argv, name=name, server=server, log=log, url=url, stall=stall,
                               timeout=timeout, kill_on_stall=True, env=env, stop_grace=stop_grace)
    if launched.verdict.outcome != "ready":
        launched.stop(stop_grace)
        raise ServerError.of(launched.verdict, launched.record.log)
    record = launched.record
    handle = Server(record.name, record.pid, record.url, record.log, launched.verdict)
    try:
        yield handle
    finally:
        launched.stop(stop_grace)
