"""
Fakes of the decision service's HTTP front, for answers the real stack cannot give on demand (a
full lane's 529, a 503, a 504, a hang, a dropped connection, a redirect) and for counting what a
client does on the wire (attempts, concurrent connections). Each is a loopback server whose name
says what it fakes; none computes anything.

    with FakeServiceAnswering(529, {"retry-after-ms": "10"}) as fake:
        Client(api_key="svc_fake", base_url=fake.url).models.list()   # -> OverloadedError
        fake.requests                                                  # 3 attempts arrived
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

REQUEST_ID_HEADER = "x-typesafe-request-id"
_CODES = {503: "unavailable", 504: "timeout", 529: "lane_full"}

DECISION = {"model": "fake-release", "answers": {"q": {"type": "noul", "noul": 0.5}}, "usage": {"input_tokens": 1, "output_tokens": 1}}
"""A decision response of the right shape, answered by the fakes that count rather than fail."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # A connection the fake itself dropped is no error of the test.


class FakeService:
    """The loopback server all fakes share: it counts requests and hands each to `answer`."""

    def __init__(self) -> None:
        self.requests = 0
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _any(self) -> None:
                # The body is read first, as the real service does, so a client's send always completes.
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with fake.lock:
                    fake.requests += 1
                    fake.bodies.append(body)
                    n = fake.requests
                fake.arrived(self)
                fake.answer(self, n)

            do_GET = do_POST = do_PUT = do_DELETE = _any

            def finish(self) -> None:
                try:
                    super().finish()
                finally:
                    fake.closed(self)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def arrived(self, handler: BaseHTTPRequestHandler) -> None:
        pass

    def closed(self, handler: BaseHTTPRequestHandler) -> None:
        pass

    def answer(self, handler: BaseHTTPRequestHandler, n: int) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    handler.send_response(status)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class FakeServiceAnswering(FakeService):
    """Answers every request with `status` (503, 504 or 529), the service's error envelope, and `headers`."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__()
        self.status = status
        self.headers = headers or {}

    def answer(self, handler: BaseHTTPRequestHandler, n: int) -> None:
        body = {"error": {"code": _CODES[self.status], "message": f"fake {self.status}", "status": self.status}}
        send(handler, self.status, json.dumps(body).encode(), {REQUEST_ID_HEADER: f"req_fake{n}", **self.headers})


class FakeServiceAnsweringBodies(FakeService):
    """Answers request n with 200 and the JSON `bodies[n - 1]`: shapes the real service does not give (a newer service's fields, a broken body)."""

    def __init__(self, *bodies: object) -> None:
        super().__init__()
        self.answers = bodies

    def answer(self, handler: BaseHTTPRequestHandler, n: int) -> None:
        send(handler, 200, json.dumps(self.answers[n - 1]).encode(), {REQUEST_ID_HEADER: f"req_fake{n}"})


@dataclass(frozen=True)
class Seen:
    """One request as it arrived: its method, path with query, headers (names in lower case) and body."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class FakeServiceRecording(FakeService):
    """
    Answers request n with `answers[n - 1]`, a status and a JSON body (and `headers[n]`, when given),
    and keeps every request in `seen`: what a client sends on the wire, route by route (a signed
    upload's PUT included, when the answers point it back at the fake). `answers` may be set after
    construction, once `url` is known.
    """

    def __init__(self, *answers: tuple[int, object]) -> None:
        super().__init__()
        self.answers: list[tuple[int, object]] = list(answers)
        self.headers: dict[int, dict[str, str]] = {}
        self.seen: list[Seen] = []

    def answer(self, handler: BaseHTTPRequestHandler, n: int) -> None:
        with self.lock:
            headers = {name.lower(): value for name, value in handler.headers.items()}
            self.seen.append(Seen(handler.command, handler.path, headers, self.bodies[n - 1]))
        status, body = self.answers[n - 1]
        send(handler, status, json.dumps(body).encode(), {REQUEST_ID_HEADER: f"req_fake{n}", **self.headers.get(n, {})})


class FakeServiceHanging(FakeService):
    """Reads each request and never answers it (until the fake stops)."""

    def answer(self, handler: BaseHTTPRequestHandler, n: int) -> None:
        self.stopping.wait(30)
        handler.close_connection = True


class FakeServiceDroppingConnections(FakeService):
    """Reads each request, then closes the connection without a response."""

    def answer(self, handler: BaseHTTPRequestHandler, n: int) -> None:
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)


class FakeServiceRedirecting(FakeService):
    """Answers every request with a redirect to `location`."""

    def __init__(self, status: int, location: str) -> None:
        super().__init__()
        self.status = status
        self.location = location

    def answer(self, handler: BaseHTTPRequestHandler, n: int) -> None:
        send(handler, self.status, b"", {"location": self.location})


class FakeServiceCountingConnections(FakeService):
    """
    Answers every request with a decision after `delay` seconds, keeping the highest number of
    requests in flight at once and of connections open at once, and how many were opened in all.
    """

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.in_flight = 0
        self.max_in_flight = 0
        self.open: set[int] = set()
        self.max_sockets = 0
        self.opened = 0

    def arrived(self, handler: BaseHTTPRequestHandler) -> None:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if id(handler) not in self.open:
                self.opened += 1
            self.open.add(id(handler))  # One handler serves one connection, request after request.
            self.max_sockets = max(self.max_sockets, len(self.open))

    def closed(self, handler: BaseHTTPRequestHandler) -> None:
        with self.lock:
            self.open.discard(id(handler))

    def answer(self, handler: BaseHTTPRequestHandler, n: int) -> None:
        time.sleep(self.delay)
        with self.lock:
            self.in_flight -= 1
        send(handler, 200, json.dumps(DECISION).encode())
