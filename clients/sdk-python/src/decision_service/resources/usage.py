"""
`client.usage`: what the account used (GET /v1/usage), per UTC day and per API key: real-time
decisions (`requests`), batch records, tokens and image credit, as the service recorded them. Like
key management, it takes the signed-in user's access token (the client's `access_token`), never the
API key.

    usage = client.usage.retrieve(group_by=["key"])   # the last 30 days, per key
    for bucket in usage.data:
        print(bucket.key_name, bucket.requests, bucket.input_tokens)
    usage.totals.batch_records

The range is at most 30 days, as far back as usage is kept; a day is "YYYY-MM-DD" in UTC. The service
checks the range and the grouping (an UnprocessableEntityError, 422 `invalid_request`, names what is
wrong); the client sends them as given.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._models import UsageGroup, UsageReport
from .._transport import AsyncTransport, Call, SyncTransport, read


def _retrieve(start: str | None, end: str | None, group_by: Sequence[UsageGroup] | UsageGroup | None) -> Call:
    grouping = group_by if group_by is None or isinstance(group_by, str) else ",".join(group_by)
    return Call("GET", path="/v1/usage", query={"start": start, "end": end, "group_by": grouping}, credential="access_token")


class UsageReports:
    def __init__(self, transport: SyncTransport) -> None:
        self._transport = transport

    def retrieve(
        self,
        *,
        start: str | None = None,
        end: str | None = None,
        group_by: Sequence[UsageGroup] | UsageGroup | None = None,
        timeout: float | None = None,
    ) -> UsageReport:
        """
        The account's usage from `start` to `end` (UTC days, "YYYY-MM-DD", inclusive; by default the
        30 days up to today) in buckets of `group_by`: "day" (the default), "key", or both
        (["day", "key"]); oldest day first and then by key name, with the totals. By day alone, every
        day of the range is listed (zeros included). A bucket per key names the key (`key_id`,
        `key_name`, a revoked key's too); a signed-in session's image decisions have no key.

            usage = client.usage.retrieve(start="2026-11-01", end="2026-11-27")
            per_key_today = client.usage.retrieve(start=today, end=today, group_by=["day", "key"])
        """
        return read(UsageReport, self._transport.request(_retrieve(start, end, group_by), timeout=timeout))


class AsyncUsageReports:
    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    async def retrieve(
        self,
        *,
        start: str | None = None,
        end: str | None = None,
        group_by: Sequence[UsageGroup] | UsageGroup | None = None,
        timeout: float | None = None,
    ) -> UsageReport:
        """The account's usage per UTC day and per API key; see `UsageReports.retrieve`."""
        return read(UsageReport, await self._transport.request(_retrieve(start, end, group_by), timeout=timeout))
