"""HTTP health probes, run in a thread so that a slow answer never delays reading the log."""

from __future__ import annotations

import http.client
import os
import queue
import threading
import time
from urllib.parse import urlsplit


class Prober:
    def __init__(self, url: str, path: str = "/health", interval: float = 0.5, timeout: float = 2.0,
                 fallback: str | None = "/v1/models"):
        parts = urlsplit(url if "//" in url else f"http://{url}")
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.https = parts.scheme == "https"
        self.path = path
        self.base = f"{parts.scheme or 'http'}://{parts.netloc}"
        self.fallback = fallback  # servers without the health path (llama-cpp-python) answer 404 there
        self.interval = interval
        self.timeout = timeout
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._thread = threading.Thread(target=self._run, name="firedup-probe", daemon=True)

    @property
    def url(self) -> str:
        return self.base + self.path

    def fileno(self) -> int:
        return self._wake_r

    def start(self) -> None:
        self._thread.start()

    def get(self) -> int | None:
        """One probe: the HTTP status, or None when nothing answers."""
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=self.timeout)
        try:
            conn.request("GET", self.path)
            status = conn.getresponse().status
            if status == 404 and self.fallback:
                self.path, self.fallback = self.fallback, None
            return status
        except (OSError, http.client.HTTPException):
            return None
        finally:
            conn.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self._results.put(self.get())
            try:
                os.write(self._wake_w, b".")
            except OSError:
                return
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def results(self) -> list[int | None]:
        try:
            os.read(self._wake_r, 4096)
        except BlockingIOError:
            pass
        out = []
        while True:
            try:
                out.append(self._results.get_nowait())
            except queue.Empty:
                return out

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.timeout + 1)
        os.close(self._wake_r)
        os.close(self._wake_w)
