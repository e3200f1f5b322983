"""
The service's numbers this client depends on. They are written once in the wire contract
(contract/limits.ts, contract/batches.ts, contract/trainings.ts, contract/jobs.ts, contract/images.ts,
contract/image-models.ts, contract/webhooks.ts, contract/webhook-signature.ts);
tests/test_contract.py checks these copies against it.
"""

from typing import Final

SHARED_ALIAS: Final = "svc-shared"
"""The alias every account may use for the shared base model."""

IMAGE_BASE_ALIAS: Final = "svc-image"
"""The image backbone's alias: the base image models are trained on (it answers no decision itself)."""

REQUEST_ID_HEADER: Final = "x-typesafe-request-id"
"""The response header naming the service's request id (quote it when asking for help)."""

DEFAULT_TIMEOUT: Final = 60.0
"""Seconds one request may take by default (LIMITS.toolRequestTimeoutMs)."""

DEFAULT_MAX_RETRIES: Final = 2

MAX_CONNECTIONS: Final = 32
# Seconds an idle connection is kept for reuse: below workerd's 5 s idle close (undici's default is 4 s too).
KEEPALIVE_EXPIRY: Final = 4.0
"""Connections one client keeps open to the service at most (LIMITS.httpConnectionsPerService)."""

BULK_FILE_BYTES: Final = 25 * 1024 * 1024
BULK_FILE_RECORDS: Final = 10_000
BATCH_LIST_PAGE_DEFAULT: Final = 20

BATCH_STATUSES: Final = ("uploading", "queued", "validating", "running", "completed", "failed", "cancelled", "expired")
TERMINAL_STATUSES: Final = ("completed", "failed", "cancelled", "expired")

TRAINING_FILE_BYTES: Final = 25 * 1024 * 1024
TRAINING_FILE_EXAMPLES: Final = 10_000
TRAINING_LIST_PAGE_DEFAULT: Final = 20

METADATA_PAIRS_MAX: Final = 16
"""A batch's or a training's `metadata`: at most this many pairs (METADATA_LIMITS.pairs in contract/jobs.ts)."""
METADATA_KEY_CHARS: Final = 64
"""A metadata key: 1 to this many characters."""
METADATA_VALUE_CHARS: Final = 512
"""A metadata value: at most this many characters."""

TRAINING_STATUSES: Final = ("uploading", "queued", "validating", "running", "accepted", "ready", "rejected", "failed", "cancelled", "expired")
TRAINING_TERMINAL_STATUSES: Final = ("ready", "rejected", "failed", "cancelled", "expired")
"""States a training never leaves. `accepted` is not one: the model is registered but not served yet."""

MAX_RETRY_WAIT: Final = 60.0
"""Seconds: a Retry-After longer than this is not waited out; the caller gets the 429 or 529."""

IMAGE_SOURCE_BYTES: Final = 10 * 1024 * 1024
"""Bytes of one image asset's file at most (10 MiB)."""
IMAGE_FILENAME_CHARS: Final = 255
"""An image asset's filename, at most this many UTF-16 code units (as the service counts them)."""
IMAGE_FILENAME_PATTERN: Final = r"^[^\u0000-\u001f\u007f-\u009f\u2028\u2029/\\]*\.(?:[jJ][pP][eE]?[gG]|[pP][nN][gG])$"
"""The filename rule the contract publishes: no path, no control character, ending in .jpg, .jpeg or .png."""
IMAGE_SHA256_PATTERN: Final = r"^[0-9a-fA-F]{64}$"
"""A file's SHA-256 as the contract takes it: 64 hex digits."""
IMAGE_PURPOSES: Final = ("prediction", "training")
IMAGE_ASSET_STATUSES: Final = ("uploading", "ready", "rejected")
IMAGE_REFUSALS: Final = {
    "image_unsupported": "not a JPEG or PNG file",
    "image_type_mismatch": "the file's format is not the one its filename's extension names",
    "image_truncated": "the file ends before the image does",
    "image_animated": "an animated image (one still image only)",
    "image_too_large": "more than 16,000,000 pixels, or more than 8,192 pixels along an edge",
    "image_undecodable": "the image data cannot be decoded",
}
"""Why the service refuses an image on completion (ImageRefusedError.code), and what each means."""

IMAGE_MODEL_STATES: Final = ("training_passed", "api_ready", "rejected")
"""An image model's states: accepted and registered, serving decisions, or refused by the acceptance rule."""

KEY_SCOPES: Final = ("decisions", "decisions_and_batches")
"""What a scoped API key may call: decisions (decisions, models, image assets and credit), or those and batches."""
KEY_MODELS_MAX: Final = 16
"""The most model names an API key may be limited to."""

WEBHOOK_EVENTS: Final = (
    "batch.completed",
    "batch.failed",
    "batch.cancelled",
    "batch.expired",
    "training.ready",
    "training.rejected",
    "training.failed",
    "training.cancelled",
    "training.expired",
)
"""The events a webhook endpoint may subscribe to: a batch or a training entering a terminal status."""
WEBHOOK_DELIVERY_STATUSES: Final = ("pending", "delivered", "failed")
WEBHOOK_ENDPOINTS_MAX: Final = 16
"""Webhook endpoints an account may have at once (then ConflictError, 409 `webhook_endpoint_limit`)."""
WEBHOOK_TOLERANCE_SECONDS: Final = 300
"""How far a delivery's `webhook-timestamp` may be from the receiver's clock before `webhooks.verify` refuses it as a replay."""
