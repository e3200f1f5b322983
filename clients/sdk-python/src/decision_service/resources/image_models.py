"""
`client.image_models`: the signed-in user's image models (GET /v1/image-models, where the deployment
has IMAGE_BROWSER=on): every image training of the account that produced a result, newest first,
with its state and the task every decision with it must repeat.

    ready = [m for m in client.image_models.list().data if m.state == "api_ready"]
    ready[0].id, ready[0].task.question_id, ready[0].task.outcome_order

Image models are trained with `client.trainings` (a training file of image assets on `svc-image`).
"""

from __future__ import annotations

from .._models import ImageModelList
from .._transport import AsyncTransport, Call, SyncTransport, read

_LIST = Call("GET", path="/v1/image-models", credential="access_token")


class ImageModels:
    def __init__(self, transport: SyncTransport) -> None:
        self._transport = transport

    def list(self, *, timeout: float | None = None) -> ImageModelList:
        """
        The account's image models, newest first: `training_passed` (accepted, not served yet),
        `api_ready` (decisions may use its `id`) or `rejected` (kept with its report; its `id` is
        None), each with its saved task and held-out figures. Takes the signed-in user's access token
        (a client without one raises ConfigurationError before anything is sent).

            for model in client.image_models.list().data:
                print(model.id, model.state, model.evaluation and model.evaluation.accuracy)
        """
        return read(ImageModelList, self._transport.request(_LIST, timeout=timeout))


class AsyncImageModels:
    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    async def list(self, *, timeout: float | None = None) -> ImageModelList:
        """The account's image models, with the access token; see `ImageModels.list`."""
        return read(ImageModelList, await self._transport.request(_LIST, timeout=timeout))
