"""
Where a client's settings come from: the constructor's argument, else its environment variable
(`SVC_API_KEY`, `SVC_BASE_URL`, `SVC_DEFAULT_MODEL`), else its default. The command-line tool's
saved credentials (~/.svc/config.json) are never read: a program says which key it uses. The service
publishes no default address, so a base URL is required; it must be https, or http to a loopback
host.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from ._constants import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, SHARED_ALIAS
from ._errors import ConfigurationError

_LOOPBACK = {"localhost", "127.0.0.1", "::1"}
_LOOPBACK_V4 = re.compile(r"^127\.\d+\.\d+\.\d+$")
_V1 = re.compile(r"/v1(/.*)?$")


@dataclass(frozen=True)
class Settings:
    api_key: str
    base_url: str
    default_model: str
    timeout: float
    max_retries: int


def resolve(
    api_key: str | None,
    base_url: str | None,
    default_model: str | None,
    timeout: float | None,
    max_retries: int | None,
) -> Settings:
    key = api_key if api_key is not None else _env("SVC_API_KEY")
    if not key:
        raise ConfigurationError("no API key: pass api_key= to Client() or set SVC_API_KEY")
    url = base_url if base_url is not None else _env("SVC_BASE_URL")
    if not url:
        raise ConfigurationError(
            "no base URL: pass base_url= to Client() or set SVC_BASE_URL to the service's address (this service has no default address)"
        )
    model = default_model if default_model is not None else (_env("SVC_DEFAULT_MODEL") or SHARED_ALIAS)
    seconds = DEFAULT_TIMEOUT if timeout is None else timeout
    check_timeout(seconds)
    retries = DEFAULT_MAX_RETRIES if max_retries is None else max_retries
    check_max_retries(retries)
    return Settings(api_key=key, base_url=normalize_base_url(url), default_model=model, timeout=float(seconds), max_retries=retries)


def check_timeout(seconds: object) -> None:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds <= 0:
        raise ConfigurationError("timeout is a positive number of seconds")


def check_max_retries(retries: object) -> None:
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ConfigurationError("max_retries is a non-negative integer")


def is_loopback_host(host: str) -> bool:
    return host.lower() in _LOOPBACK or _LOOPBACK_V4.match(host) is not None


def check_service_url(raw: str, what: str) -> str:
    """`raw` when it is https, or http to a loopback host; ValueError naming `what` otherwise."""
    try:
        parts = urlsplit(raw)
        host = parts.hostname or ""
    except ValueError:
        raise ValueError(f"{what} URL is not a valid URL") from None
    if not host:
        raise ValueError(f"{what} URL is not a valid URL")
    if parts.scheme == "https":
        return raw
    if parts.scheme == "http" and is_loopback_host(host):
        return raw
    if parts.scheme == "http":
        raise ValueError(f"{what} URL uses plaintext http:// to a remote host ({host}); use https://")
    raise ValueError(f"{what} URL must use https:// (or http:// on loopback), got {parts.scheme or 'no scheme'}")


def normalize_base_url(raw: str) -> str:
    try:
        check_service_url(raw, "base")
    except ValueError as err:
        raise ConfigurationError(f"{err} (base_url or SVC_BASE_URL)") from None
    parts = urlsplit(raw)
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ConfigurationError("base URL must not hold credentials, a query or a fragment: the API key goes in api_key")
    path = parts.path.rstrip("/")
    origin = f"{parts.scheme}://{parts.netloc}"
    if _V1.search(path):
        raise ConfigurationError(f"base URL is the service's address without /v1/...: use {origin}{_V1.sub('', path)}")
    return f"{origin}{path}"


def _env(name: str) -> str | None:
    """An environment variable, None when unset or empty."""
    return os.environ.get(name) or None
