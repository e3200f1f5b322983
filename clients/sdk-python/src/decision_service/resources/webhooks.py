"""
`client.webhooks`: the account's webhook endpoints (POST /v1/webhooks, GET /v1/webhooks,
GET/DELETE /v1/webhooks/{id}, POST /v1/webhooks/{id}/rotate_secret, GET /v1/webhooks/{id}/deliveries),
and `verify`, which checks a received delivery. Managing endpoints takes the signed-in user's access
token (the client's `access_token`), never an API key, like key management and usage; `verify` sends
nothing and takes no credential.

    session = Client(access_token=token)
    endpoint = session.webhooks.create(url="https://example.com/hooks", events=["batch.completed", "batch.failed"])
    endpoint.secret                  # whsec_...: shown at creation (and rotation) only
    for delivery in session.webhooks.deliveries.list(endpoint.id):
        print(delivery.event_type, delivery.status, delivery.attempts, delivery.last_error)

A job's move into a terminal status is POSTed (a `WebhookEvent` as JSON) to every endpoint of the
account subscribed to its event, signed in the Standard Webhooks format
(https://www.standardwebhooks.com): the headers `webhook-id` (the event's id, the same on every
retry: drop repeats by it), `webhook-timestamp` (unix seconds of the attempt) and `webhook-signature`
(`v1,<base64 HMAC-SHA256(key, "{id}.{timestamp}.{body}")>`, space-separated when the previous secret
signs too, for a day after a rotation; the key is the base64-decoded secret after `whsec_`). A 2xx
answer delivers it; anything else is retried for about a day. The receiver checks it with `verify`:

    event = client.webhooks.verify(request_body, request_headers)   # secret: webhook_secret / SVC_WEBHOOK_SECRET
    if event.type == "batch.completed":
        results = client.batches.results(event.data.id)

Verification uses the standard library only (hmac, hashlib, base64).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import quote

import pydantic

from .._constants import WEBHOOK_TOLERANCE_SECONDS
from .._errors import ConfigurationError, InputError, WebhookVerificationError
from .._models import (
    AsyncPages,
    DeletedWebhookEndpoint,
    WebhookDelivery,
    WebhookDeliveryList,
    WebhookEndpoint,
    WebhookEndpointList,
    WebhookEndpointWithSecret,
    WebhookEvent,
    WebhookEventType,
    parse,
)
from .._transport import AsyncTransport, Call, SyncTransport, encode_json, read

_PATH = "/v1/webhooks"
_LIST = Call("GET", path=_PATH, credential="access_token")
_SECRET_PREFIX = "whsec_"
_TIMESTAMP = re.compile(r"[0-9]{1,12}")

Headers = Mapping[str, str]
"""A received request's headers: any mapping (a dict, httpx.Headers, a framework's headers); names are matched in any case."""


def _now() -> float:
    """The receiver's clock, in unix seconds (the tests move it)."""
    return time.time()


def _at(endpoint_id: str, action: str | None = None) -> str:
    if not isinstance(endpoint_id, str) or not endpoint_id:
        raise InputError("a webhook endpoint id is a non-empty string")
    path = f"{_PATH}/{quote(endpoint_id, safe='')}"
    return path if action is None else f"{path}/{action}"


def _create(url: str, events: Sequence[WebhookEventType], description: str | None) -> Call:
    if isinstance(events, str):
        raise InputError('events is a list of event names (["batch.completed"]), not one string')
    body: dict[str, object] = {"url": url, "events": list(events)}
    if description is not None:
        body["description"] = description
    return Call("POST", path=_PATH, body=encode_json(body), credential="access_token")


def _retrieve(endpoint_id: str) -> Call:
    return Call("GET", path=_at(endpoint_id), credential="access_token")


def _delete(endpoint_id: str) -> Call:
    return Call("DELETE", path=_at(endpoint_id), credential="access_token")


def _rotate(endpoint_id: str) -> Call:
    return Call("POST", path=_at(endpoint_id, "rotate_secret"), body=b"{}", credential="access_token")


def _deliveries(endpoint_id: str, limit: int | None, after: str | None) -> Call:
    return Call("GET", path=_at(endpoint_id, "deliveries"), query={"limit": limit, "after": after}, credential="access_token")


# ---- Verifying a received delivery ----


def _header(headers: Headers, name: str) -> str | None:
    """The header `name` (lower case), found in any case; None when absent or empty."""
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if isinstance(k, str) and k.lower() == name), None)
    return value if isinstance(value, str) and value else None


def _key(secret: str | None, default: Callable[[], str | None]) -> bytes:
    """The HMAC key of `secret` (else the client's webhook secret): the base64 after `whsec_`."""
    chosen = secret if secret is not None else default()
    if not chosen:
        raise ConfigurationError(
            "no webhook secret: pass secret= to webhooks.verify, or webhook_secret= to Client(), or set SVC_WEBHOOK_SECRET "
            "(the endpoint's whsec_... secret, shown when it was created or rotated)"
        )
    encoded = chosen[len(_SECRET_PREFIX) :] if chosen.startswith(_SECRET_PREFIX) else chosen
    try:
        # Strict: only the base64 alphabet, with its padding where it belongs (as the service writes it).
        key = binascii.a2b_base64(encoded.encode("ascii"), strict_mode=True)
    except (binascii.Error, ValueError):
        key = b""
    if not key:
        raise ConfigurationError("the webhook secret is not whsec_ followed by base64 (copy it whole, as creation or rotation showed it)")
    return key


def _check_tolerance(tolerance: float) -> None:
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not math.isfinite(tolerance) or tolerance < 0:
        raise ConfigurationError("tolerance is a non-negative number of seconds")


def _verify_signature(payload: str | bytes, headers: Headers, key: bytes, tolerance: float) -> bytes:
    """The raw body, once its headers, timestamp and a v1 signature are checked; WebhookVerificationError otherwise."""
    _check_tolerance(tolerance)
    body = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
    event_id = _header(headers, "webhook-id")
    timestamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    missing = [name for name, value in (("webhook-id", event_id), ("webhook-timestamp", timestamp), ("webhook-signature", signatures)) if value is None]
    if event_id is None or timestamp is None or signatures is None:
        raise WebhookVerificationError(f"missing header {', '.join(missing)}: not a webhook of this service")
    if not _TIMESTAMP.fullmatch(timestamp):
        raise WebhookVerificationError("webhook-timestamp is not a number of seconds")
    skew = _now() - int(timestamp)
    if skew > tolerance:
        raise WebhookVerificationError(f"webhook-timestamp is {skew:.0f} s old, more than the tolerance of {tolerance:g} s (a replay, or a clock off)")
    if -skew > tolerance:
        raise WebhookVerificationError(f"webhook-timestamp is {-skew:.0f} s in the future, more than the tolerance of {tolerance:g} s (a clock off)")
    signed = f"{event_id}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
    matched = False
    for candidate in signatures.split():
        version, _, signature = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(signature.encode("utf-8"), expected):
            matched = True
    if not matched:
        raise WebhookVerificationError("no v1 signature of webhook-signature matches this secret over this body (a wrong secret, or a changed body)")
    return body


def _event(body: bytes) -> WebhookEvent:
    try:
        data: object = json.loads(body)
    except ValueError:
        raise WebhookVerificationError("the body is not JSON") from None
    try:
        return parse(WebhookEvent, data)
    except pydantic.ValidationError as err:
        problems = "; ".join(".".join(map(str, e["loc"])) + f": {e['msg']}" for e in err.errors(include_url=False))
        raise WebhookVerificationError(f"the body is not a webhook event: {problems}") from None


class _Verifier:
    """`verify` and `verify_signature`, the same on the sync and the async client: they send nothing."""

    def __init__(self, webhook_secret: Callable[[], str | None]) -> None:
        self._webhook_secret = webhook_secret

    def verify(self, payload: str | bytes, headers: Headers, secret: str | None = None, *, tolerance: float = WEBHOOK_TOLERANCE_SECONDS) -> WebhookEvent:
        """
        Checks a received delivery and returns its event: the `webhook-id`, `webhook-timestamp` and
        `webhook-signature` headers are there, the timestamp is within `tolerance` seconds of this
        machine's clock (an old delivery replayed fails), and one of the `v1` signatures is
        `secret`'s over exactly `payload`, the raw body as it arrived (before any JSON parsing: a
        re-encoded body fails). `secret` is the endpoint's `whsec_...` secret, else the client's
        `webhook_secret` (SVC_WEBHOOK_SECRET); during the day after a rotation either secret verifies.

            @app.post("/hooks")
            async def hooks(request: Request) -> Response:
                try:
                    event = client.webhooks.verify(await request.body(), request.headers)
                except WebhookVerificationError:
                    return Response(status_code=400)
                ...   # drop repeats by request.headers["webhook-id"]
                return Response(status_code=204)

        Raises WebhookVerificationError for a delivery that fails any check (or whose body is not a
        webhook event), ConfigurationError when there is no secret or it is not `whsec_` and base64.
        """
        return _event(self._checked(payload, headers, secret, tolerance))

    def verify_signature(self, payload: str | bytes, headers: Headers, secret: str | None = None, *, tolerance: float = WEBHOOK_TOLERANCE_SECONDS) -> None:
        """The checks of `verify` alone, for a body read some other way: returns None, or raises WebhookVerificationError."""
        self._checked(payload, headers, secret, tolerance)

    def _checked(self, payload: str | bytes, headers: Headers, secret: str | None, tolerance: float) -> bytes:
        return _verify_signature(payload, headers, _key(secret, self._webhook_secret), tolerance)


class Deliveries:
    def __init__(self, transport: SyncTransport) -> None:
        self._transport = transport

    def list(self, endpoint_id: str, *, limit: int | None = None, after: str | None = None, timeout: float | None = None) -> WebhookDeliveryList:
        """
        A page of the endpoint's delivery log, newest first (`limit` of them, 1 to 100, 20 when
        None; after the delivery `after`). Iterating it gives every delivery from it on, each later
        page fetched when the loop reaches it; `next_cursor` is the last delivery's id while
        `has_more`. Finished deliveries are kept 30 days.

            for delivery in session.webhooks.deliveries.list(endpoint.id):
                print(delivery.event_type, delivery.job_id, delivery.status, delivery.last_status_code)
        """
        self._transport.require("access_token")
        page = read(WebhookDeliveryList, self._transport.request(_deliveries(endpoint_id, limit, after), timeout=timeout))
        # Private state may change on a frozen model; type checkers see only the frozen dataclass.
        page._fetch = lambda cursor: self.list(endpoint_id, limit=limit, after=cursor, timeout=timeout)  # type: ignore[misc]
        return page


class AsyncDeliveries:
    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    def list(
        self, endpoint_id: str, *, limit: int | None = None, after: str | None = None, timeout: float | None = None
    ) -> AsyncPages[WebhookDelivery, WebhookDeliveryList]:
        """Awaited, one page of the endpoint's delivery log; iterated with `async for`, every delivery (see `Deliveries.list`)."""
        # Checked here, not when the pages are awaited: a client without the credential is told at the call.
        self._transport.require("access_token")
        _at(endpoint_id)

        async def page(cursor: str | None) -> WebhookDeliveryList:
            return read(WebhookDeliveryList, await self._transport.request(_deliveries(endpoint_id, limit, cursor), timeout=timeout))

        return AsyncPages(page, after)


class Webhooks(_Verifier):
    deliveries: Deliveries

    def __init__(self, transport: SyncTransport, webhook_secret: Callable[[], str | None]) -> None:
        super().__init__(webhook_secret)
        self._transport = transport
        self.deliveries = Deliveries(transport)

    def create(self, *, url: str, events: Sequence[WebhookEventType], description: str | None = None, timeout: float | None = None) -> WebhookEndpointWithSecret:
        """
        Registers an endpoint of the account for `events` (WEBHOOK_EVENTS names them); the answer
        has its signing `secret`, which the service shows now and at a rotation only. `url` is
        HTTPS to a public host (a local stack also takes http:// to loopback); at most 2048
        characters, `description` at most 256. An account has at most 16 endpoints: one more
        raises ConflictError (409 `webhook_endpoint_limit`). The service checks every field
        (UnprocessableEntityError, 422, names what is wrong).

            endpoint = session.webhooks.create(url="https://example.com/hooks", events=["batch.completed"], description="orders")
        """
        return read(WebhookEndpointWithSecret, self._transport.request(_create(url, events, description), timeout=timeout))

    def list(self, *, timeout: float | None = None) -> WebhookEndpointList:
        """Every endpoint of the account, newest first (`data`); never a secret."""
        return read(WebhookEndpointList, self._transport.request(_LIST, timeout=timeout))

    def retrieve(self, endpoint_id: str, *, timeout: float | None = None) -> WebhookEndpoint:
        """One endpoint of the account (never its secret); another account's or an unknown one raises NotFoundError."""
        return read(WebhookEndpoint, self._transport.request(_retrieve(endpoint_id), timeout=timeout))

    def delete(self, endpoint_id: str, *, timeout: float | None = None) -> DeletedWebhookEndpoint:
        """Deletes an endpoint; its pending deliveries go with it. Deleting it again raises NotFoundError."""
        return read(DeletedWebhookEndpoint, self._transport.request(_delete(endpoint_id), timeout=timeout))

    def rotate_secret(self, endpoint_id: str, *, timeout: float | None = None) -> WebhookEndpointWithSecret:
        """
        Gives the endpoint a new signing secret, answered with it (`secret`). For a day the previous
        secret signs each delivery too, so a receiver may switch to the new one meanwhile: `verify`
        takes either.
        """
        return read(WebhookEndpointWithSecret, self._transport.request(_rotate(endpoint_id), timeout=timeout))


class AsyncWebhooks(_Verifier):
    deliveries: AsyncDeliveries

    def __init__(self, transport: AsyncTransport, webhook_secret: Callable[[], str | None]) -> None:
        super().__init__(webhook_secret)
        self._transport = transport
        self.deliveries = AsyncDeliveries(transport)

    async def create(
        self, *, url: str, events: Sequence[WebhookEventType], description: str | None = None, timeout: float | None = None
    ) -> WebhookEndpointWithSecret:
        """Registers an endpoint of the account; see `Webhooks.create`."""
        return read(WebhookEndpointWithSecret, await self._transport.request(_create(url, events, description), timeout=timeout))

    async def list(self, *, timeout: float | None = None) -> WebhookEndpointList:
        """Every endpoint of the account, newest first; see `Webhooks.list`."""
        return read(WebhookEndpointList, await self._transport.request(_LIST, timeout=timeout))

    async def retrieve(self, endpoint_id: str, *, timeout: float | None = None) -> WebhookEndpoint:
        """One endpoint of the account; see `Webhooks.retrieve`."""
        return read(WebhookEndpoint, await self._transport.request(_retrieve(endpoint_id), timeout=timeout))

    async def delete(self, endpoint_id: str, *, timeout: float | None = None) -> DeletedWebhookEndpoint:
        """Deletes an endpoint and its pending deliveries; see `Webhooks.delete`."""
        return read(DeletedWebhookEndpoint, await self._transport.request(_delete(endpoint_id), timeout=timeout))

    async def rotate_secret(self, endpoint_id: str, *, timeout: float | None = None) -> WebhookEndpointWithSecret:
        """Gives the endpoint a new signing secret; see `Webhooks.rotate_secret`."""
        return read(WebhookEndpointWithSecret, await self._transport.request(_rotate(endpoint_id), timeout=timeout))
