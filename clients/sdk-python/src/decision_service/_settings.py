"""
Where a client's settings come from: the constructor's argument, else its environment variable
(`SVC_API_KEY`, `SVC_ACCESS_TOKEN`, `SVC_BASE_URL`, `SVC_DEFAULT_MODEL`, `SVC_WEBHOOK_SECRET`), else its default. The
command-line tool's saved credentials (~/.svc/config.json) are never read by a client: a program
says which credentials it uses, and one that wants the access token `svc login` saved asks for it
with `saved_access_token()`. The service publishes no default address, so a base URL is required; it
must be https, or http to a loopback host.

Two credentials, as the service has two kinds: an API key (models, decisions, batches) and a
signed-in user's access token (trainings, retiring a trained model, a session's image models and
image decisions); image assets and the image credit take either (the API key when the client has
one). A client needs at least one; a method whose kind of credential the client lacks raises
ConfigurationError before any request.

The webhook secret (`webhook_secret`, SVC_WEBHOOK_SECRET) is no credential: it is what
`client.webhooks.verify` checks a received delivery's signature with when it is given none.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal, TypeAlias
from urllib.parse import urlsplit

from ._constants import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, SHARED_ALIAS
from ._errors import ConfigurationError

_LOOPBACK = {"localhost", "127.0.0.1", "::1"}
_LOOPBACK_V4 = re.compile(r"^127\.\d+\.\d+\.\d+$")
_V1 = re.compile(r"/v1(/.*)?$")


Credential: TypeAlias = Literal["api_key", "access_token"]
"""The kind of credential a route takes."""

MISSING_CREDENTIAL = {
    "api_key": "this client has no API key, which models, decisions and batches take: pass api_key= to Client() or set SVC_API_KEY",
    "access_token": (
        "this client has no access token: trainings, retiring a model, usage, key management, image models and image decisions take a signed-in user's "
        "access token, never an API key; pass access_token= to Client() or set SVC_ACCESS_TOKEN (after `svc login`, access_token=saved_access_token() reads the one it saved)"
    ),
}


@dataclass(frozen=True)
class Settings:
    api_key: str | None
    access_token: str | None
    base_url: str
    default_model: str
    timeout: float
    max_retries: int
    webhook_secret: str | None = None
    """An endpoint's signing secret (`whsec_...`), which `webhooks.verify` uses when it is given none."""

    def credential(self, kind: Credential | tuple[Credential, ...]) -> str:
        """
        The credential of `kind`, or the first of several kinds the client has (a route that takes
        either); ConfigurationError saying how to give it when the client has none.
        """
        kinds = (kind,) if isinstance(kind, str) else kind
        for each in kinds:
            value = self.api_key if each == "api_key" else self.access_token
            if value is not None:
                return value
        raise ConfigurationError(MISSING_CREDENTIAL[kinds[0] if kinds else "api_key"])


def resolve(
    api_key: str | None,
    access_token: str | None,
    base_url: str | None,
    default_model: str | None,
    timeout: float | None,
    max_retries: int | None,
    webhook_secret: str | None = None,
) -> Settings:
    key = (api_key if api_key is not None else _env("SVC_API_KEY")) or None
    token = (access_token if access_token is not None else _env("SVC_ACCESS_TOKEN")) or None
    if key is None and token is None:
        raise ConfigurationError(
            "no API key: pass api_key= to Client() or set SVC_API_KEY "
            "(a client only for trainings may have an access token instead: access_token= or SVC_ACCESS_TOKEN)"
        )
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
    return Settings(
        api_key=key,
        access_token=token,
        base_url=normalize_base_url(url),
        default_model=model,
        timeout=float(seconds),
        max_retries=retries,
        webhook_secret=(webhook_secret if webhook_secret is not None else _env("SVC_WEBHOOK_SECRET")) or None,
    )


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


def saved_access_token(path: str | os.PathLike[str] | None = None) -> str:
    """
    The access token `svc login` saved, for a program that chooses to act as the signed-in user:

        client = Client(access_token=saved_access_token())

    The file is `path`, else SVC_CONFIG_PATH, else ~/.svc/config.json. ConfigurationError when it
    holds no session or the session has expired (`svc login` again: this client does not refresh
    it). The token is for the deployment that file names; messages never repeat it.
    """
    where = Path(path if path is not None else (_env("SVC_CONFIG_PATH") or Path.home() / ".svc" / "config.json"))
    try:
        saved = json.loads(where.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(f"no saved settings at {where}: sign in with `svc login`") from None
    except OSError as err:
        raise ConfigurationError(f"cannot read the saved settings {where}: {err.strerror or 'read failed'}") from None
    except ValueError:
        raise ConfigurationError(f"the saved settings {where} are not valid JSON; fix or remove the file (svc logout removes it)") from None
    session = saved.get("session") if isinstance(saved, dict) else None
    token = session.get("access_token") if isinstance(session, dict) else None
    if not isinstance(token, str) or not token:
        raise ConfigurationError(f"the saved settings {where} hold no signed-in session: sign in with `svc login`")
    expires = session.get("expires_at") if isinstance(session, dict) else None
    try:
        expired = isinstance(expires, str) and datetime.fromisoformat(expires).astimezone(timezone.utc) <= datetime.now(timezone.utc)
    except ValueError:
        expired = False  # An unreadable time: the service will say whether the token still works.
    if expired:
        raise ConfigurationError(f"the session saved in {where} expired at {expires}: sign in again with `svc login`")
    return token


def _env(name: str) -> str | None:
    """An environment variable, None when unset or empty."""
    return os.environ.get(name) or None
