"""At most 32 connections per client, and no redirect ever followed."""

from __future__ import annotations

import asyncio
import time

import pytest

from decision_service import MAX_CONNECTIONS, APIError, AsyncClient, Client, noul
from decision_service._constants import KEEPALIVE_EXPIRY

from .fakes import FakeServiceCountingConnections, FakeServiceRedirecting


def test_keeps_at_most_32_connections_open_to_one_service_for_100_calls_at_once() -> None:
    async def hundred(url: str) -> None:
        async with AsyncClient(api_key="svc_fake", base_url=url) as client:
            await asyncio.gather(*(client.system_one(state=f"s{i}", questions={"q": noul("?")}) for i in range(100)))

    with FakeServiceCountingConnections(0.2) as fake:
        asyncio.run(hundred(fake.url))
        assert fake.requests == 100
        assert MAX_CONNECTIONS == 32
        assert fake.max_in_flight == MAX_CONNECTIONS
        assert fake.max_sockets <= MAX_CONNECTIONS


def test_reuses_an_idle_connection_but_drops_it_before_the_services_5_second_idle_close() -> None:
    # The edge (workerd) closes a connection idle for 5 s; a reuse racing that close is a reset.
    assert KEEPALIVE_EXPIRY < 5
    with FakeServiceCountingConnections(0) as fake, Client(api_key="svc_fake", base_url=fake.url, max_retries=0) as client:
        client.system_one(state="s", questions={"q": noul("?")})
        client.system_one(state="s", questions={"q": noul("?")})
        assert fake.opened == 1
        time.sleep(KEEPALIVE_EXPIRY + 0.3)
        client.system_one(state="s", questions={"q": noul("?")})
        assert fake.opened == 2


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_never_follows_a_redirect_a_3xx_is_an_api_error_and_the_new_address_is_not_contacted(status: int) -> None:
    with FakeServiceCountingConnections(0) as target, FakeServiceRedirecting(status, f"{target.url}/v1/models") as fake:
        with pytest.raises(APIError) as caught:
            Client(api_key="svc_fake", base_url=fake.url).models.list()
        assert caught.value.status == status
        assert "redirects are not followed" in caught.value.message
        assert (fake.requests, target.requests) == (1, 0)
