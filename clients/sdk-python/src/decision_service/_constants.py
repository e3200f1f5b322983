"""
The service's numbers this client depends on. They are written once in the wire contract
(contract/limits.ts, contract/batches.ts, contract/trainings.ts); tests/test_contract.py checks these
copies against it.
"""

from typing import Final

SHARED_ALIAS: Final = "svc-shared"
"""The alias every account may use for the shared base model."""

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

TRAINING_STATUSES: Final = ("uploading", "queued", "validating", "running", "accepted", "ready", "rejected", "failed", "cancelled", "expired")
TRAINING_TERMINAL_STATUSES: Final = ("ready", "rejected", "failed", "cancelled", "expired")
"""States a training never leaves. `accepted` is not one: the model is registered but not served yet."""

MAX_RETRY_WAIT: Final = 60.0
"""Seconds: a Retry-After longer than this is not waited out; the caller gets the 429 or 529."""
