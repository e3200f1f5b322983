"""
`client.image_decisions`: a decision about one photo by a trained image model, from a signed-in
session (POST /v1/image-decisions, where the deployment has IMAGE_BROWSER=on). The arguments and the
answer are those of `client.system_one`, which makes the same decision with the API key where
IMAGE_API is on:

    reply = client.image_decisions.create(
        model="ft:svc-image:0f3c...",
        state="",
        # Exactly the question the model was trained on: its `task` in client.image_models.list().
        questions={"shape": choice(["circle", "square", "triangle"], "Which shape is drawn?")},
        images=[{"asset_id": asset.id}],
    )
    answer = reply.choice_answer("shape")
    answer.choice, answer.unknown_probability    # the most probable answer, and the mass on "none of them"

Each decision is paid from the account's prepaid credit (`client.image_credit`): the service
reserves its worst case before any GPU work (PaymentRequiredError, 402, when the credit cannot cover
it) and charges what it used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .._models import DecisionResponse
from .._questions import Question, State
from .._settings import check_max_retries, check_timeout
from .._transport import AsyncTransport, Call, SyncTransport, encode_json, read


def _create_call(
    default_model: str,
    state: State,
    questions: Mapping[str, Question],
    model: str | None,
    images: Sequence[Mapping[str, str]],
    timeout: float | None,
    max_retries: int | None,
) -> Call:
    """The decision's request, after the per-call settings are checked (as `system_one` checks them)."""
    if timeout is not None:
        check_timeout(timeout)
    if max_retries is not None:
        check_max_retries(max_retries)
    body = {"model": model if model is not None else default_model, "state": state, "questions": questions, "images": images}
    return Call("POST", path="/v1/image-decisions", body=encode_json(body), credential="access_token")


class ImageDecisions:
    def __init__(self, transport: SyncTransport, default_model: Callable[[], str]) -> None:
        self._transport = transport
        self._default_model = default_model

    def create(
        self,
        *,
        state: State,
        questions: Mapping[str, Question],
        model: str | None = None,
        images: Sequence[Mapping[str, str]],
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> DecisionResponse:
        """
        Classifies one photo (`images=[{"asset_id": ...}]`, a ready asset of the account) with an
        image model (`model`, else the client's `default_model`), with the signed-in user's access
        token (a client without one raises ConfigurationError before anything is sent). The question
        must be the model's saved question, its answers in the saved order (UnprocessableEntityError
        `task_mismatch` says what differs); an unknown model or asset is a NotFoundError, too little
        credit a PaymentRequiredError. Retried only after 429 and 529, as decisions are.

            reply = client.image_decisions.create(model=model, state="", questions=questions, images=[{"asset_id": asset.id}])
            reply.choice_answer("shape").unknown_probability
        """
        call = _create_call(self._default_model(), state, questions, model, images, timeout, max_retries)
        return read(DecisionResponse, self._transport.request(call, timeout=timeout, max_retries=max_retries))


class AsyncImageDecisions:
    def __init__(self, transport: AsyncTransport, default_model: Callable[[], str]) -> None:
        self._transport = transport
        self._default_model = default_model

    async def create(
        self,
        *,
        state: State,
        questions: Mapping[str, Question],
        model: str | None = None,
        images: Sequence[Mapping[str, str]],
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> DecisionResponse:
        """Classifies one photo with an image model, with the access token; see `ImageDecisions.create`."""
        call = _create_call(self._default_model(), state, questions, model, images, timeout, max_retries)
        return read(DecisionResponse, await self._transport.request(call, timeout=timeout, max_retries=max_retries))
