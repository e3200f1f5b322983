"""
`client.keys`: the account's API keys (POST /v1/keys, GET /v1/keys, POST /v1/keys/{id}/revoke).
Key management takes the signed-in user's access token (the client's `access_token`), never an API
key, like trainings and usage.

    session = Client(access_token=token)
    key = session.keys.create(name="ci", scope="decisions", models=["svc-shared"], expires_at=datetime.now(timezone.utc) + timedelta(days=30))
    key.secret                       # svc_<id>_<secret>: shown this once, never again
    for k in session.keys.list().keys:
        print(k.name, k.id, k.status, k.scope, k.models, k.expires_at)
    session.keys.revoke(key.id)

A key may be created for less than everything its account can do: until `expires_at` (then every
call with it raises AuthenticationError, 401 `expired_key`), for a `scope` of routes ("decisions",
or "decisions_and_batches"), and for the `models` its calls may name (otherwise PermissionDeniedError,
403 `insufficient_scope`). Left out, the key can do what its account can, for ever. The service
checks every field (UnprocessableEntityError, 422, names what is wrong); the client sends them as
given, a datetime as its ISO form in UTC.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from urllib.parse import quote

from .._errors import InputError
from .._models import CreatedKey, KeyList, KeyMetadata, KeyScope
from .._transport import AsyncTransport, Call, SyncTransport, encode_json, read

_LIST = Call("GET", path="/v1/keys", credential="access_token")


def _iso(value: datetime | str) -> str:
    """A timezone-aware datetime in UTC (`2026-12-31T00:00:00.000Z`); a string as given."""
    if isinstance(value, str):
        return value
    if value.tzinfo is None or value.utcoffset() is None:
        raise InputError("expires_at is a timezone-aware datetime (e.g. datetime.now(timezone.utc) + timedelta(days=30)), or an RFC 3339 string with its offset")
    return value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _create(name: str, expires_at: datetime | str | None, scope: KeyScope | None, models: Sequence[str] | None) -> Call:
    body: dict[str, object] = {"name": name}
    if expires_at is not None:
        body["expires_at"] = _iso(expires_at)
    if scope is not None:
        body["scope"] = scope
    if models is not None:
        if isinstance(models, str):
            raise InputError("models is a list of model names, not one string")
        body["models"] = list(models)
    return Call("POST", path="/v1/keys", body=encode_json(body), credential="access_token")


def _revoke(key_id: str) -> Call:
    return Call("POST", path=f"/v1/keys/{quote(key_id, safe='')}/revoke", body=b"{}", credential="access_token")


class Keys:
    def __init__(self, transport: SyncTransport) -> None:
        self._transport = transport

    def create(
        self,
        *,
        name: str,
        expires_at: datetime | str | None = None,
        scope: KeyScope | None = None,
        models: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> CreatedKey:
        """
        Creates an API key of the account; the answer is its metadata and its `secret`, which the
        service shows this once (keep it; only its digest is stored).

            key = session.keys.create(name="nightly", scope="decisions_and_batches", expires_at="2026-12-31T00:00:00Z")
            worker = Client(api_key=key.secret)

        `expires_at`: a timezone-aware datetime, or an RFC 3339 string with its offset, in the future
        (never when None). `scope`: "decisions" (decisions, models, image assets and credit) or
        "decisions_and_batches" (everything when None). `models`: 1 to 16 model names (aliases or
        release ids) its decisions and batch records may name (any when None).
        """
        return read(CreatedKey, self._transport.request(_create(name, expires_at, scope, models), timeout=timeout))

    def list(self, *, timeout: float | None = None) -> KeyList:
        """
        Every key of the account, newest first, with its metadata: `status` ("active", "revoked" or
        "expired"), `expires_at`, `scope` and `models` (None: no limit). Never a secret.

            for key in session.keys.list().keys:
                print(key.name, key.id, key.status)
        """
        return read(KeyList, self._transport.request(_LIST, timeout=timeout))

    def revoke(self, key_id: str, *, timeout: float | None = None) -> KeyMetadata:
        """
        Revokes a key of the account (its `id`, as listings show it): every later call with it
        raises AuthenticationError (401 `revoked_key`). Repeatable; another account's or an unknown
        key raises NotFoundError.

            session.keys.revoke(key.id).status   # "revoked"
        """
        return read(KeyMetadata, self._transport.request(_revoke(key_id), timeout=timeout))


class AsyncKeys:
    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    async def create(
        self,
        *,
        name: str,
        expires_at: datetime | str | None = None,
        scope: KeyScope | None = None,
        models: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> CreatedKey:
        """Creates an API key; see `Keys.create`."""
        return read(CreatedKey, await self._transport.request(_create(name, expires_at, scope, models), timeout=timeout))

    async def list(self, *, timeout: float | None = None) -> KeyList:
        """Every key of the account, newest first; see `Keys.list`."""
        return read(KeyList, await self._transport.request(_LIST, timeout=timeout))

    async def revoke(self, key_id: str, *, timeout: float | None = None) -> KeyMetadata:
        """Revokes a key of the account; see `Keys.revoke`."""
        return read(KeyMetadata, await self._transport.request(_revoke(key_id), timeout=timeout))
