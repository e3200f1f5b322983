"""
`client.models`: the models this account may use, each a release with its aliases.

    for model in client.models.list().models:
        print(model.name, model.aliases)
"""

from __future__ import annotations

from .._models import ModelList
from .._transport import AsyncTransport, Call, SyncTransport, read


class Models:
    def __init__(self, transport: SyncTransport) -> None:
        self._transport = transport

    def list(self, *, timeout: float | None = None) -> ModelList:
        """
        Every serving release the account may use (shared ones and its own), newest first, with
        the aliases that name it.

            models = client.models.list().models
            print(models[0].name, models[0].aliases)
        """
        reply = self._transport.request(Call("GET", path="/v1/models"), timeout=timeout)
        return read(ModelList, reply)


class AsyncModels:
    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    async def list(self, *, timeout: float | None = None) -> ModelList:
        """Every serving release the account may use; see `Models.list`."""
        reply = await self._transport.request(Call("GET", path="/v1/models"), timeout=timeout)
        return read(ModelList, reply)
