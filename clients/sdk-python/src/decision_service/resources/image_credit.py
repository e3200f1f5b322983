"""
`client.image_credit`: the account's prepaid credit for image decisions and the published price
(GET /v1/image-credit). Amounts are integers of micro-USD; text decisions are not charged.

    credit = client.image_credit.retrieve()
    credit.balance_micro_usd      # what new image decisions may reserve
    credit.reserved_micro_usd     # held by image decisions in flight
    credit.pricing                # CreditPricing(currency="USD", micro_usd_per_billable_token=2)

The route takes either credential, as the image assets do: the client's API key when it has one,
else its access token.
"""

from __future__ import annotations

from .._models import CreditBalance
from .._transport import AsyncTransport, Call, SyncTransport, read

# Either credential: the API key when the client has one, else the signed-in user's access token.
_RETRIEVE = Call("GET", path="/v1/image-credit", credential=("api_key", "access_token"))


class ImageCredit:
    def __init__(self, transport: SyncTransport) -> None:
        self._transport = transport

    def retrieve(self, *, timeout: float | None = None) -> CreditBalance:
        """
        The account's credit: the balance new image decisions may reserve, what decisions in flight
        hold, and the price per billable token. Credit is granted by the deployment's operator; an
        image decision it cannot cover raises PaymentRequiredError (402) before any GPU work.

            credit = client.image_credit.retrieve()
            print(credit.balance_micro_usd / 1_000_000, credit.pricing.currency)
        """
        return read(CreditBalance, self._transport.request(_RETRIEVE, timeout=timeout))


class AsyncImageCredit:
    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    async def retrieve(self, *, timeout: float | None = None) -> CreditBalance:
        """The account's credit and the price; see `ImageCredit.retrieve`."""
        return read(CreditBalance, await self._transport.request(_RETRIEVE, timeout=timeout))
