"""
The errors the client raises. Every answer of the service that is not a success becomes an
`APIError`, of the subclass named after its status where the service uses that status, carrying the
envelope's `code` and `message` and the request id the service gave the response::

    try:
        client.system_one(state=state, questions=questions)
    except RateLimitError as err:
        print(err.retry_after, err.request_id)
    except APIError as err:
        print(err.status, err.code, err.message)

A request that got no answer is an `APIConnectionError` (status None); when the client's own
timeout ended it, an `APIConnectionTimeoutError`. Neither proves that no work happened on the
service, which is why decisions are never retried after them.
"""

from __future__ import annotations

import email.utils
import json
import re
import time

import httpx

from ._constants import IMAGE_REFUSALS, REQUEST_ID_HEADER
from ._models import ImageRefusal

_NUMBER = re.compile(r"^\d+(\.\d+)?$")


class DecisionServiceError(Exception):
    """Base class of every error this package raises."""


class ConfigurationError(DecisionServiceError):
    """
    A client setting that cannot work (no credential, no base URL, plaintext HTTP to a remote host),
    or a method called on a client that lacks the kind of credential it takes (an access token for
    trainings, an API key for decisions), raised before anything is sent.
    """


class InputError(DecisionServiceError):
    """Input refused before anything is sent (a batch file over the limits, an unreadable file)."""


class WebhookVerificationError(DecisionServiceError):
    """
    A received webhook that `client.webhooks.verify` refuses: a `webhook-id`, `webhook-timestamp` or
    `webhook-signature` header missing, a timestamp too far from now (a replay, or a clock off), no
    `v1` signature of the secret over exactly this body, or a body that is not a webhook event.
    Answer it with a 400 and do nothing else::

        try:
            event = client.webhooks.verify(request.body, request.headers)
        except WebhookVerificationError:
            return Response(status=400)
    """


class APIError(DecisionServiceError):
    """An error answer of the service, or no answer at all."""

    message: str
    status: int | None
    """The HTTP status; None when no response came."""
    code: str | None
    """The service's stable error code (`rate_limited`, `model_not_found`, ...); None when the body had none."""
    request_id: str | None
    """The service's request id of the response; None when there was none."""
    headers: httpx.Headers | None
    body: object
    """The parsed error body (or its text when it was not JSON)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
        headers: httpx.Headers | None = None,
        body: object = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.request_id = request_id
        self.headers = headers
        self.body = body

    @property
    def retry_after(self) -> float | None:
        """Seconds the service asked the client to wait (`retry-after-ms`, else `Retry-After`); None when it did not say."""
        return retry_after(self.headers)

    def __str__(self) -> str:
        where = f" (request id {self.request_id})" if self.request_id else ""
        status = f"{self.status} " if self.status is not None else ""
        code = f"{self.code}: " if self.code else ""
        return f"{status}{code}{self.message}{where}"


class AuthenticationError(APIError):
    """
    401: a missing, invalid, revoked (`revoked_key`) or expired (`expired_key`) API key, an invalid or
    expired access token, a disabled account, or the wrong kind of credential
    (`wrong_credential_kind`: an API key where trainings take an access token, or the reverse).
    """


class PaymentRequiredError(APIError):
    """
    402: an image decision whose worst case is more than the account's prepaid credit
    (`insufficient_credit`), refused before any GPU work: nothing was charged. Add credit and retry::

        try:
            client.image_decisions.create(model=model, state="", questions=questions, images=[{"asset_id": asset.id}])
        except PaymentRequiredError:
            print(client.image_credit.retrieve().balance_micro_usd)
    """


class PermissionDeniedError(APIError):
    """
    403: the credential is valid but may not do this: a key created for less than this call
    (`insufficient_scope`: a decisions-only key on a batch route, or a model it was not created for)::

        try:
            limited.batches.create(input_bytes=100)
        except PermissionDeniedError as err:
            print(err.code)   # "insufficient_scope"
    """


class NotFoundError(APIError):
    """
    404: an unknown model (or one this account may not use, or of the wrong kind: a text model for an
    image decision), or an unknown batch, training or image asset (or another account's); an image
    decision's asset that is not a ready asset of the account.
    """


class ConflictError(APIError):
    """
    409: the batch or training is not in a state that allows this (submit before upload, results or a
    report before the end), a create repeats an idempotency key with another input size
    (`idempotency_conflict`), or the account already has as many webhook endpoints as it may
    (`webhook_endpoint_limit`: delete one first).
    """


class GoneError(APIError):
    """410: a batch's results after their retention period."""


class PayloadTooLargeError(APIError):
    """
    413: an image decision whose image needs more visual tokens than the serving runtime takes
    (`context_too_large`), or a file sent to a signed storage address over its limit (`payload_too_large`).
    """


class UnprocessableEntityError(APIError):
    """
    422: an invalid request body (a bad question, too few options, an empty state), or a question a
    trained model was not trained on (`task_mismatch`).
    """


class ImageRefusedError(UnprocessableEntityError):
    """
    422 on an image asset's completion: the service refused the image, before any GPU work. `code`
    says why (IMAGE_REFUSALS says what each code means); the asset stays rejected, and a corrected
    file is a new asset::

        try:
            client.image_assets.upload("cat.jpg")
        except ImageRefusedError as err:
            print(err.code)   # "image_type_mismatch", ...
    """

    code: ImageRefusal


class RateLimitError(APIError):
    """429: an account rate, token or batch limit; nothing ran. Retried after `retry_after`."""


class ServiceUnavailableError(APIError):
    """503: the model is not being served right now. Never retried for you: work may have started."""


class GatewayTimeoutError(APIError):
    """504: the decision waited 30 seconds for the GPU. Never retried for you: it may still run."""


class OverloadedError(APIError):
    """529: the service's execution lane is full; nothing ran. Retried with backoff."""


class APIConnectionError(APIError):
    """No response: the connection failed or dropped. The request may or may not have been processed."""

    def __init__(self, message: str = "the connection to the service failed") -> None:
        super().__init__(message)


class APIConnectionTimeoutError(APIConnectionError):
    """No response within the client's `timeout`. The request may still be processed by the service."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"no response from the service within {timeout:g} s (the request may still be processed)")


_STATUS_CLASSES: dict[int, type[APIError]] = {
    401: AuthenticationError,
    402: PaymentRequiredError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    413: PayloadTooLargeError,
    422: UnprocessableEntityError,
    429: RateLimitError,
    503: ServiceUnavailableError,
    504: GatewayTimeoutError,
    529: OverloadedError,
}


def error_from_response(response: httpx.Response) -> APIError:
    """The error for an answer that is not a success, of the class of its status."""
    text = response.text
    body: object = text
    try:
        body = json.loads(text)
    except ValueError:
        pass  # Not JSON (a proxy's page, an empty body): the message says so.
    code: str | None = None
    message = f"the service answered {response.status_code} without an error envelope" + (f": {text[:200]}" if text else "")
    if isinstance(body, dict):
        envelope = body.get("error")
        if isinstance(envelope, dict) and isinstance(envelope.get("code"), str) and isinstance(envelope.get("message"), str):
            code = envelope["code"]
            message = envelope["message"]
    cls = ImageRefusedError if response.status_code == 422 and code in IMAGE_REFUSALS else _STATUS_CLASSES.get(response.status_code, APIError)
    return cls(
        message,
        status=response.status_code,
        code=code,
        request_id=response.headers.get(REQUEST_ID_HEADER),
        headers=response.headers,
        body=body,
    )


def retry_after(headers: httpx.Headers | None) -> float | None:
    """The wait a response asks for, in seconds, or None."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms", "").strip()
    if _NUMBER.match(ms):
        return float(ms) / 1000
    after = headers.get("retry-after", "").strip()
    if not after:
        return None
    if _NUMBER.match(after):
        return float(after)
    try:
        when = email.utils.parsedate_to_datetime(after)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
