"""
The one path every request takes, sync and async: the request with redirects refused, the answer
read to its end, errors by status, and retries.

Retries happen only after 429 (an account limit) and 529 (the execution lane is full): the service
answers both before any work starts, so a retry cannot compute anything twice. The wait is what the
service asks for (`retry-after-ms`, else `Retry-After`), or exponential backoff with jitter when it
says nothing. Everything else (503, 504, a timeout, a dropped connection) is raised at once: a
decision may have run, and only the caller can tell whether running it again is right. A call that
repeating cannot make do anything twice may name more answers to retry (`Call.retry_also`).

httpx holds at most MAX_CONNECTIONS connections per client; more requests wait for one (the pool
wait has no timeout of its own, as the TypeScript client's queue has none).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import httpx
import pydantic

from ._constants import KEEPALIVE_EXPIRY, MAX_CONNECTIONS, MAX_RETRY_WAIT, REQUEST_ID_HEADER
from ._errors import APIConnectionError, APIConnectionTimeoutError, APIError, error_from_response
from ._models import parse
from ._settings import Credential, Settings, check_service_url
from ._version import VERSION

_RETRIED = frozenset({429, 529})
_BACKOFF_INITIAL = 0.5
_BACKOFF_MAX = 8.0

Method = Literal["GET", "POST", "PUT", "DELETE"]


@dataclass(frozen=True)
class Call:
    method: Method
    path: str | None = None
    """A path under the base URL (`/v1/models`), sent with the client's credential of kind `credential`."""
    url: str | None = None
    """An absolute URL given by the service (a signed upload): sent without any credential."""
    query: Mapping[str, str | int | None] = field(default_factory=dict)
    body: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    json_body: bool = True
    credential: Credential | tuple[Credential, ...] = "api_key"
    """
    The kind of credential the route takes: the API key, or the signed-in user's access token; or
    several, of which the first the client has is sent (image assets take either).
    """
    retry_also: Callable[[APIError], bool] | None = None
    """
    Errors besides 429 and 529 that this call is retried after, with the same waits and count: only
    for a call that repeating cannot make do anything twice (an image asset's completion).
    """


@dataclass(frozen=True)
class Reply:
    data: object
    status: int
    request_id: str | None


_M = TypeVar("_M", bound=pydantic.BaseModel)


def read(cls: type[_M], reply: Reply) -> _M:
    """The reply's JSON as `cls`, with the reply's request id; an APIError when the service answered another shape."""
    try:
        return parse(cls, reply.data, reply.request_id)
    except pydantic.ValidationError as err:
        raise APIError(
            f"the service answered {reply.status} with a body this client cannot read: {_problems(err)}",
            status=reply.status,
            request_id=reply.request_id,
        ) from None


def _problems(err: pydantic.ValidationError) -> str:
    # One line, each problem at its path from the class read: `Batch.request_counts.total: Input should be a valid integer`.
    return "; ".join(".".join(map(str, (err.title, *e["loc"]))) + f": {e['msg']}" for e in err.errors(include_url=False))


def encode_json(value: object) -> bytes:
    """JSON in the order it is given (a dict keeps its order); any Mapping or Sequence is accepted."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_plain).encode("utf-8")


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def retry_wait(err: APIError, attempt: int) -> float | None:
    """Seconds before retry number `attempt + 1`, or None when the service asked for more than MAX_RETRY_WAIT."""
    asked = err.retry_after
    if asked is not None:
        return asked if asked <= MAX_RETRY_WAIT else None
    backoff: float = min(_BACKOFF_INITIAL * 2.0**attempt, _BACKOFF_MAX)
    return backoff * (0.75 + random.random() * 0.25)


def _retried(call: Call, err: APIError) -> bool:
    return err.status in _RETRIED or (call.retry_also is not None and call.retry_also(err))


class _Base:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def require(self, credential: Credential) -> None:
        """ConfigurationError, saying how to give it, when the client has no credential of this kind."""
        self._settings.credential(credential)

    def _limits(self) -> httpx.Limits:
        # Idle connections are dropped before the edge's own 5 s idle close, which would otherwise race a reuse.
        return httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS, keepalive_expiry=KEEPALIVE_EXPIRY)

    def _timeout(self, seconds: float) -> httpx.Timeout:
        return httpx.Timeout(seconds, pool=None)

    def _prepare(self, call: Call) -> tuple[str, dict[str, str], dict[str, str | int] | None]:
        headers = {"user-agent": f"decision-service-sdk-python/{VERSION}", **call.headers}
        if call.url is not None:
            # A signed destination carries its own credential; neither the API key nor the access token goes to storage.
            try:
                url = check_service_url(call.url, "upload")
            except ValueError as err:
                raise APIError(f"the service gave an unusable upload address: {err}") from None
        else:
            url = f"{self._settings.base_url}{call.path or ''}"
            # ConfigurationError, before anything is sent, when the client lacks this kind of credential.
            headers["authorization"] = f"Bearer {self._settings.credential(call.credential)}"
            headers["accept"] = "application/json"
        if call.body is not None and call.json_body:
            headers.setdefault("content-type", "application/json")
        # No params at all when there are none: httpx would re-encode the URL's own query, and a
        # signed upload URL's query must arrive byte for byte.
        query = {k: v for k, v in call.query.items() if v is not None}
        return url, headers, query or None

    def _reply(self, response: httpx.Response, call: Call) -> Reply:
        if 300 <= response.status_code < 400:
            raise _redirect_error(response, call)
        if response.status_code >= 400 or response.status_code < 200:
            raise error_from_response(response)
        request_id = response.headers.get(REQUEST_ID_HEADER)
        if not response.content:
            return Reply(None, response.status_code, request_id)
        try:
            data: object = json.loads(response.content)
        except ValueError:
            raise APIError(
                f"the service answered {response.status_code} with a body that is not JSON",
                status=response.status_code,
                request_id=request_id,
                headers=response.headers,
                body=response.text,
            ) from None
        return Reply(data, response.status_code, request_id)


class SyncTransport(_Base):
    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._http = httpx.Client(follow_redirects=False, limits=self._limits(), timeout=self._timeout(settings.timeout))

    def close(self) -> None:
        self._http.close()

    def request(self, call: Call, *, timeout: float | None = None, max_retries: int | None = None) -> Reply:
        retries = self._settings.max_retries if max_retries is None else max_retries
        attempt = 0
        while True:
            try:
                return self._once(call, timeout)
            except APIError as err:
                wait = retry_wait(err, attempt) if _retried(call, err) and attempt < retries else None
                if wait is None:
                    raise
            time.sleep(wait)
            attempt += 1

    def _once(self, call: Call, timeout: float | None) -> Reply:
        url, headers, query = self._prepare(call)
        seconds = self._settings.timeout if timeout is None else timeout
        try:
            response = self._http.request(call.method, url, params=query, headers=headers, content=call.body, timeout=self._timeout(seconds))
        except httpx.TimeoutException:
            raise APIConnectionTimeoutError(seconds) from None
        except httpx.TransportError as err:
            raise APIConnectionError(f"the connection to the service failed: {err}") from err
        return self._reply(response, call)


class AsyncTransport(_Base):
    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._http = httpx.AsyncClient(follow_redirects=False, limits=self._limits(), timeout=self._timeout(settings.timeout))

    async def close(self) -> None:
        await self._http.aclose()

    async def request(self, call: Call, *, timeout: float | None = None, max_retries: int | None = None) -> Reply:
        retries = self._settings.max_retries if max_retries is None else max_retries
        attempt = 0
        while True:
            try:
                return await self._once(call, timeout)
            except APIError as err:
                wait = retry_wait(err, attempt) if _retried(call, err) and attempt < retries else None
                if wait is None:
                    raise
            await asyncio.sleep(wait)
            attempt += 1

    async def _once(self, call: Call, timeout: float | None) -> Reply:
        url, headers, query = self._prepare(call)
        seconds = self._settings.timeout if timeout is None else timeout
        try:
            response = await self._http.request(
                call.method, url, params=query, headers=headers, content=call.body, timeout=self._timeout(seconds)
            )
        except httpx.TimeoutException:
            raise APIConnectionTimeoutError(seconds) from None
        except httpx.TransportError as err:
            raise APIConnectionError(f"the connection to the service failed: {err}") from err
        return self._reply(response, call)


def _redirect_error(response: httpx.Response, call: Call) -> APIError:
    # A signed upload URL is a credential: neither it nor where it was sent is repeated in a message.
    where = f" to {response.headers.get('location', 'an unnamed location')}" if call.url is None else ""
    return APIError(
        f"the service answered a redirect ({response.status_code}){where}; redirects are not followed: "
        "set the base URL to the service's own address",
        status=response.status_code,
        request_id=response.headers.get(REQUEST_ID_HEADER),
        headers=response.headers,
    )
