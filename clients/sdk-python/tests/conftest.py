"""
What the tests know of the running service, read once from the environment before any test changes
it. test/python-sdk.test.ts (the service's suite) starts the local stack and sets all of these:

    SVC_BASE_URL, SVC_API_KEY        the stack and a fresh account's key (the tests that need the
                                     service skip without them)
    SVC_TEST_OTHER_API_KEY           another account's key (a batch of another account is a 404)
    SVC_TEST_LIMITED_API_KEY         an account with tokens_per_second 1 and max_active_batches 1
    SVC_TEST_EXPIRED_BATCH_ID        a batch of SVC_API_KEY's account finished past its retention
    SVC_TEST_PAGED_BATCH_ID          a finished batch of that account with SVC_TEST_PAGED_RECORDS results
    SVC_TEST_RELEASE_ID              the release behind svc-shared
    SVC_TEST_ACCESS_TOKEN            the signed-in user's access token of SVC_API_KEY's account
    SVC_TEST_TRAINING_FILE           a training file that trains in seconds (test/support/training.ts noulFile)
    SVC_TEST_IMAGE_DIR               photos written by sharp at test time: photo.jpg (a 320 x 240 JPEG)
                                     and photo.png (a 40 x 30 PNG); the stack has IMAGE_API and IMAGE_BROWSER on
    SVC_TEST_CONTRACT                the contract's JSON Schemas and constants, dumped from contract/
    SVC_TEST_WEBHOOK_URL             a webhook receiver on loopback (test/support/webhook-receiver.ts),
                                     which the stack may deliver to: it answers every delivery 200
    SVC_TEST_WEBHOOK_RECEIVED        where GET answers what that receiver got: a JSON list of
                                     {"headers": {...}, "body": "<raw>", "at": <ms>}
    SVC_TEST_SECRETS_LEDGER          where secrets the tests obtain are written for the log scan
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import pytest

from decision_service import Client

SETTINGS = ("SVC_API_KEY", "SVC_ACCESS_TOKEN", "SVC_BASE_URL", "SVC_DEFAULT_MODEL", "SVC_CONFIG_PATH", "SVC_WEBHOOK_SECRET")


@dataclass(frozen=True)
class Stack:
    base_url: str
    api_key: str
    other_api_key: str | None
    limited_api_key: str | None
    expired_batch_id: str | None
    paged_batch_id: str | None
    paged_records: int
    release_id: str | None
    access_token: str | None
    training_file: str | None
    image_dir: str | None
    webhook_url: str | None
    webhook_received: str | None


def _read_stack() -> Stack | None:
    base_url, api_key = os.environ.get("SVC_BASE_URL"), os.environ.get("SVC_API_KEY")
    if not base_url or not api_key:
        return None
    return Stack(
        base_url=base_url,
        api_key=api_key,
        other_api_key=os.environ.get("SVC_TEST_OTHER_API_KEY") or None,
        limited_api_key=os.environ.get("SVC_TEST_LIMITED_API_KEY") or None,
        expired_batch_id=os.environ.get("SVC_TEST_EXPIRED_BATCH_ID") or None,
        paged_batch_id=os.environ.get("SVC_TEST_PAGED_BATCH_ID") or None,
        paged_records=int(os.environ.get("SVC_TEST_PAGED_RECORDS") or 0),
        release_id=os.environ.get("SVC_TEST_RELEASE_ID") or None,
        access_token=os.environ.get("SVC_TEST_ACCESS_TOKEN") or None,
        training_file=os.environ.get("SVC_TEST_TRAINING_FILE") or None,
        image_dir=os.environ.get("SVC_TEST_IMAGE_DIR") or None,
        webhook_url=os.environ.get("SVC_TEST_WEBHOOK_URL") or None,
        webhook_received=os.environ.get("SVC_TEST_WEBHOOK_RECEIVED") or None,
    )


STACK = _read_stack()
LEDGER = os.environ.get("SVC_TEST_SECRETS_LEDGER")


@pytest.fixture(autouse=True)
def clean_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with none of the SDK's variables set; a test sets what it needs."""
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def stack() -> Stack:
    if STACK is None:
        pytest.skip("needs the running service: set SVC_BASE_URL and SVC_API_KEY (the suite's test/python-sdk.test.ts does)")
    return STACK


@pytest.fixture
def client(stack: Stack) -> Iterator[Client]:
    with Client(api_key=stack.api_key, base_url=stack.base_url) as c:
        yield c


def require(value: str | None, name: str) -> str:
    """`value`, or a skip naming the variable that would have given it."""
    if value is None:
        pytest.skip(f"needs {name} (set by the suite's test/python-sdk.test.ts)")
    return value


def remember(secret: str) -> str:
    """A secret a test obtained (a new API key's): the suite's log scan looks for it."""
    if LEDGER:
        with open(LEDGER, "a", encoding="utf-8") as ledger:
            ledger.write(secret + "\n")
    return secret


def remember_upload(url: str) -> None:
    """A signed upload URL's signature is a secret: the suite's log scan looks for it."""
    signature = parse_qs(urlsplit(url).query).get("X-Amz-Signature")
    if LEDGER and signature:
        with open(LEDGER, "a", encoding="utf-8") as ledger:
            ledger.write(signature[0] + "\n")
