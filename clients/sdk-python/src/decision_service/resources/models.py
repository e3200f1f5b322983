"""
`client.models`: the models this account may use, each a release with its aliases, and the
account's trained models (`client.trainings` makes them): their evaluation reports, and retiring one.

    for model in client.models.list().models:
        print(model.name, model.aliases, model.evaluation)
"""

from __future__ import annotations

from urllib.parse import quote

from .._errors import InputError
from .._models import EvaluationReport, ModelList, RetiredModel
from .._transport import AsyncTransport, Call, SyncTransport, read


def _path(model: str) -> str:
    if not isinstance(model, str) or not model:
        raise InputError("a model name is a non-empty string")
    return f"/v1/models/{quote(model, safe='')}"


def _retire_call(model: str) -> Call:
    return Call("POST", path=f"{_path(model)}/retire", body=b"{}", credential="access_token")


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

    def evaluation(self, model: str, *, timeout: float | None = None) -> EvaluationReport:
        """
        The evaluation report of one of the account's trained models (what its training published),
        with the API key. NotFoundError for any other model.

            report = client.models.evaluation("ft:svc-shared:...")
            report.questions[0].candidate.primary, report.questions[0].zero_shot.primary
        """
        return read(EvaluationReport, self._transport.request(Call("GET", path=f"{_path(model)}/evaluation"), timeout=timeout))

    def retire(self, model: str, *, timeout: float | None = None) -> RetiredModel:
        """
        Retires one of the account's trained models: from then on decisions naming it answer 404
        and it leaves the listing. Takes the signed-in user's access token, as trainings do (a
        client without one raises ConfigurationError before any request); NotFoundError for a model
        that is not the account's trained model, or is already retired.

            client.models.retire(training.model)
        """
        self._transport.require("access_token")
        return read(RetiredModel, self._transport.request(_retire_call(model), timeout=timeout))


class AsyncModels:
    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    async def list(self, *, timeout: float | None = None) -> ModelList:
        """Every serving release the account may use; see `Models.list`."""
        reply = await self._transport.request(Call("GET", path="/v1/models"), timeout=timeout)
        return read(ModelList, reply)

    async def evaluation(self, model: str, *, timeout: float | None = None) -> EvaluationReport:
        """The evaluation report of one of the account's trained models; see `Models.evaluation`."""
        return read(EvaluationReport, await self._transport.request(Call("GET", path=f"{_path(model)}/evaluation"), timeout=timeout))

    async def retire(self, model: str, *, timeout: float | None = None) -> RetiredModel:
        """Retires one of the account's trained models, with the access token; see `Models.retire`."""
        self._transport.require("access_token")
        return read(RetiredModel, await self._transport.request(_retire_call(model), timeout=timeout))
