"""A pytest fixture: ``firedup_server(argv, **options)`` starts a server, waits
until it is ready (or fails the test with firedup's verdict) and stops it at
the end of the test.

    def test_completion(firedup_server):
        server = firedup_server(["vllm", "serve", "m", "--port", "8001"])
        assert httpx.get(server.url + "/health").status_code == 200
"""

from __future__ import annotations

import itertools
from contextlib import ExitStack

import pytest

from ._api import launch


@pytest.fixture
def firedup_server(tmp_path):
    numbers = itertools.count()
    with ExitStack() as stack:
        def start(argv, **options):
            options.setdefault("log", tmp_path / f"server-{next(numbers)}.log")
            return stack.enter_context(launch(argv, **options))

        yield start
