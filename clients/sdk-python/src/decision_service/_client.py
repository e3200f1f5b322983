"""
The clients, sync and async: their settings, and the resources that share their connections.

    from decision_service import Client, noul
    client = Client()   # SVC_API_KEY, SVC_ACCESS_TOKEN, SVC_BASE_URL, SVC_DEFAULT_MODEL from the environment
    reply = client.system_one(state="I was charged twice", questions={"refund": noul("Refund?")})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType

from ._models import DecisionResponse
from ._questions import Question, State
from ._settings import Settings, check_max_retries, check_timeout, resolve
from ._transport import AsyncTransport, Call, SyncTransport, encode_json, read
from .resources.batches import AsyncBatches, Batches
from .resources.image_assets import AsyncImageAssets, ImageAssets
from .resources.image_credit import AsyncImageCredit, ImageCredit
from .resources.image_decisions import AsyncImageDecisions, ImageDecisions
from .resources.image_models import AsyncImageModels, ImageModels
from .resources.keys import AsyncKeys, Keys
from .resources.models import AsyncModels, Models
from .resources.trainings import AsyncTrainings, Trainings
from .resources.usage import AsyncUsageReports, UsageReports
from .resources.webhooks import AsyncWebhooks, Webhooks


def _decision_call(
    settings: Settings,
    state: State,
    questions: Mapping[str, Question],
    model: str | None,
    images: Sequence[Mapping[str, str]] | None,
) -> Call:
    body: dict[str, object] = {"model": model if model is not None else settings.default_model, "state": state, "questions": questions}
    if images is not None:
        body["images"] = images
    return Call("POST", path="/v1/systemone", body=encode_json(body))


def _check_call(timeout: float | None, max_retries: int | None) -> None:
    if timeout is not None:
        check_timeout(timeout)
    if max_retries is not None:
        check_max_retries(max_retries)


class _Settings:
    _settings: Settings

    @property
    def base_url(self) -> str:
        """The service's address, without a trailing slash."""
        return self._settings.base_url

    @property
    def default_model(self) -> str:
        return self._settings.default_model

    @property
    def timeout(self) -> float:
        """Seconds one request may wait for each step (connecting, sending, the answer)."""
        return self._settings.timeout

    @property
    def max_retries(self) -> int:
        return self._settings.max_retries

    def __repr__(self) -> str:
        # The API key and the access token stay out of the printed form.
        return f"{type(self).__name__}(base_url={self.base_url!r}, default_model={self.default_model!r})"


class Client(_Settings):
    """
    The decision service's client. Each setting comes from its argument, else its environment
    variable, else its default; the `svc` tool's saved credentials are never read.

        client = Client()   # SVC_API_KEY and SVC_BASE_URL from the environment
        local = Client(api_key="svc_...", base_url="http://127.0.0.1:8787", timeout=10)

    `api_key` (SVC_API_KEY) is what models, decisions and batches take; `access_token`
    (SVC_ACCESS_TOKEN), a signed-in user's access token, is what trainings, retiring a trained model,
    the account's API keys (`keys`), usage and webhook endpoints (`webhooks`), and a session's image
    models and image decisions take; image assets and the image credit take either (the API key when
    the client has one). A client needs at least one; a method whose credential it lacks raises
    ConfigurationError before sending anything. `webhook_secret` (SVC_WEBHOOK_SECRET) is the
    endpoint secret `webhooks.verify` checks received deliveries with when it is given none.
    """

    models: Models
    batches: Batches
    trainings: Trainings
    image_assets: ImageAssets
    image_decisions: ImageDecisions
    image_models: ImageModels
    image_credit: ImageCredit
    usage: UsageReports
    keys: Keys
    webhooks: Webhooks

    def __init__(
        self,
        *,
        api_key: str | None = None,
        access_token: str | None = None,
        base_url: str | None = None,
        default_model: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        webhook_secret: str | None = None,
    ) -> None:
        self._settings = resolve(api_key, access_token, base_url, default_model, timeout, max_retries, webhook_secret)
        self._transport = SyncTransport(self._settings)
        self.models = Models(self._transport)
        self.batches = Batches(self._transport, lambda: self._settings.default_model)
        self.trainings = Trainings(self._transport, lambda: self._settings.default_model)
        self.image_assets = ImageAssets(self._transport)
        self.image_decisions = ImageDecisions(self._transport, lambda: self._settings.default_model)
        self.image_models = ImageModels(self._transport)
        self.image_credit = ImageCredit(self._transport)
        self.usage = UsageReports(self._transport)
        self.keys = Keys(self._transport)
        self.webhooks = Webhooks(self._transport, lambda: self._settings.webhook_secret)

    def system_one(
        self,
        *,
        state: State,
        questions: Mapping[str, Question],
        model: str | None = None,
        images: Sequence[Mapping[str, str]] | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> DecisionResponse:
        """
        One real-time decision: typed answers to every question about `state`, and token usage. The
        model is `model`, else the client's `default_model`. Retried only after 429 and 529; a 503,
        504, timeout or dropped connection is raised, since the decision may have run.

            reply = client.system_one(
                state={"ticket": "My card was charged twice for one order"},
                questions={"refund": noul("Does the customer want money back?"), "topic": choice(["billing", "bug"])},
            )
            reply.noul_answer("refund").noul       # 0.93
            reply.choice_answer("topic").choice    # "billing"

        With `images=[{"asset_id": ...}]` (where the service has IMAGE_API on) it is an image
        decision: a trained image model, its one `choice` question, an answer with
        `unknown_probability`, paid from the account's prepaid credit (PaymentRequiredError when it
        cannot cover it); see `image_decisions`.
        """
        _check_call(timeout, max_retries)
        call = _decision_call(self._settings, state, questions, model, images)
        return read(DecisionResponse, self._transport.request(call, timeout=timeout, max_retries=max_retries))

    def close(self) -> None:
        """Closes the client's connections."""
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class AsyncClient(_Settings):
    """
    The decision service's client for asyncio; the same settings and methods as `Client`, awaited.

        async with AsyncClient() as client:
            reply = await client.system_one(state="I was charged twice", questions={"refund": noul("Refund?")})
    """

    models: AsyncModels
    batches: AsyncBatches
    trainings: AsyncTrainings
    image_assets: AsyncImageAssets
    image_decisions: AsyncImageDecisions
    image_models: AsyncImageModels
    image_credit: AsyncImageCredit
    usage: AsyncUsageReports
    keys: AsyncKeys
    webhooks: AsyncWebhooks

    def __init__(
        self,
        *,
        api_key: str | None = None,
        access_token: str | None = None,
        base_url: str | None = None,
        default_model: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        webhook_secret: str | None = None,
    ) -> None:
        self._settings = resolve(api_key, access_token, base_url, default_model, timeout, max_retries, webhook_secret)
        self._transport = AsyncTransport(self._settings)
        self.models = AsyncModels(self._transport)
        self.batches = AsyncBatches(self._transport, lambda: self._settings.default_model)
        self.trainings = AsyncTrainings(self._transport, lambda: self._settings.default_model)
        self.image_assets = AsyncImageAssets(self._transport)
        self.image_decisions = AsyncImageDecisions(self._transport, lambda: self._settings.default_model)
        self.image_models = AsyncImageModels(self._transport)
        self.image_credit = AsyncImageCredit(self._transport)
        self.usage = AsyncUsageReports(self._transport)
        self.keys = AsyncKeys(self._transport)
        self.webhooks = AsyncWebhooks(self._transport, lambda: self._settings.webhook_secret)

    async def system_one(
        self,
        *,
        state: State,
        questions: Mapping[str, Question],
        model: str | None = None,
        images: Sequence[Mapping[str, str]] | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> DecisionResponse:
        """One real-time decision; see `Client.system_one`."""
        _check_call(timeout, max_retries)
        call = _decision_call(self._settings, state, questions, model, images)
        return read(DecisionResponse, await self._transport.request(call, timeout=timeout, max_retries=max_retries))

    async def close(self) -> None:
        """Closes the client's connections."""
        await self._transport.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()
