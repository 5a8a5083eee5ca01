"""A server's URL as a user gives it: split, with what cannot be reached said in one line."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from ._exceptions import InputError


def split(url: str) -> tuple[SplitResult, str]:
    """``url`` split (a bare host:port is http://host:port), and its host: an
    InputError for one with no host, or whose port is not a port."""
    try:
        parts = urlsplit(url if "//" in url else f"http://{url}")
        parts.port  # noqa: B018 (urlsplit checks the port only when it is read)
    except ValueError as e:
        raise InputError(f"not a URL firedup can reach: {url} ({e})") from None
    if not parts.hostname:
        raise InputError(f"no host in the URL {url} (http://HOST:PORT)")
    return parts, parts.hostname
