"""HTTP health probes, run in a thread so that a slow answer never delays reading the log.

With ``generate``, a healthy server is also asked for a one-token completion
(the model named by its /v1/models): ready means it can generate."""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import queue
import socket
import threading
import time

import psutil

from .. import _url


def is_local(host: str) -> bool:
    """Whether ``host`` names this machine (loopback, or one of its addresses)."""
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    mine = {a.address.split("%")[0] for nics in psutil.net_if_addrs().values() for a in nics}
    ips = [ipaddress.ip_address(a.split("%")[0]) for a in addresses]
    return all(ip.is_loopback or ip.is_unspecified or str(ip) in mine for ip in ips)


def address_of(host: str | None) -> str | None:
    """The IP address ``host`` names (None: unknown or unresolvable)."""
    if not host:
        return None
    try:
        return str(socket.getaddrinfo(host.strip("[]"), None)[0][4][0]).split("%")[0]
    except (OSError, IndexError):
        return None


class Prober:
    def __init__(self, url: str, path: str = "/health", interval: float = 0.5, timeout: float = 2.0,
                 fallback: str | None = "/v1/models", generate: bool = False):
        parts, self.host = _url.split(url)
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.https = parts.scheme == "https"
        self.path = path
        self.base = f"{parts.scheme or 'http'}://{parts.netloc}"
        self.fallback = fallback  # servers without the health path (llama-cpp-python) answer 404 there
        self.generate = generate
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

    def _request(self, method: str, path: str, body: dict | None = None) -> tuple[int | None, bytes]:
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=self.timeout)
        try:
            payload = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=payload, headers={"Content-Type": "application/json"} if body else {})
            response = conn.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException):
            return None, b""
        finally:
            conn.close()

    def get(self) -> dict[str, int | None]:
        """One probe: the health status (None when nothing answers) and, when
        asked for, the status of a one-token completion."""
        status, _ = self._request("GET", self.path)
        if status == 404 and self.fallback:
            self.path, self.fallback = self.fallback, None
        result: dict[str, int | None] = {"status": status}
        if self.generate and status == 200:
            result["generate"] = self._generate()
        return result

    def _generate(self) -> int | None:
        status, body = self._request("GET", "/v1/models")
        try:
            model = json.loads(body)["data"][0]["id"] if status == 200 else None
        except (ValueError, KeyError, IndexError, TypeError):
            model = None
        if model is None:
            return status
        status, _ = self._request("POST", "/v1/completions", {"model": model, "prompt": "Hello", "max_tokens": 1})
        return status

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self._results.put(self.get())
            try:
                os.write(self._wake_w, b".")
            except OSError:
                return
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def results(self) -> list[dict[str, int | None]]:
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
