"""The plumbing shared by the fake services: a ThreadingHTTPServer on 127.0.0.1 (port 0) in a daemon thread.

A fake is a `FakeServer` subclass naming its `handler` (a `FakeHandler` subclass whose `_serve` answers one
request) and clearing its own state in `_clear` (called under the lock by `reset`). The base class records
requests, queues programmed behaviours per key (consumed in order; times=None means every request from then
on) and wakes up waiting answers on `reset`; the handler turns a behaviour into an answer with `_apply`:

    status     {status, headers}          the handler's `failure_body`
    body       {status, body, content_type}
    redirect   {status, location}
    slow       {seconds}                  then the normal answer (reset() wakes it and drops the connection)
    trickle    {body, interval}           a 200 whose body arrives one byte per interval
    oversized  {size, content_length}     `size` junk bytes in 64 KB chunks (progress in `streams`)

`FakeServer(tls_context=ctx)` serves HTTPS instead (the listening socket is wrapped; `base_url` says https).
Each fake module exposes its process-wide server with `get_fake_x = singleton(FakeX)` and its pytest fixture
with `fake_x = fixture_for(get_fake_x, "fake_x")`.
"""
from __future__ import annotations

import atexit
import ssl
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Hashable, Iterator, Self, TypeVar

import pytest

DISCONNECTS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, ssl.SSLError)

F = TypeVar("F", bound="FakeServer")
T = TypeVar("T")


@dataclass
class RecordedRequest:
    method: str
    path: str  # with the query string
    headers: dict[str, str]  # lower-cased names


@dataclass
class StreamRecord:
    """Progress of one oversized answer; `done` is set when the handler stops writing."""

    total: int
    sent: int = 0
    aborted: bool = False
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class Behaviour:
    kind: str  # status | body | redirect | slow | trickle | oversized
    remaining: int | None  # None = forever
    params: dict[str, Any]


def configured(factory: Callable[..., T], overrides: dict[str, Any], **defaults: Any) -> T:
    """`factory(**defaults)` with `overrides` applied on top."""
    return factory(**{**defaults, **overrides})


class FakeHandler(BaseHTTPRequestHandler):
    owner: Any  # the FakeServer, set by FakeServer.start
    methods: tuple[str, ...] = ("GET",)  # others answer 501, as BaseHTTPRequestHandler does
    failure_body = b"failure body: must never reach the user"
    failure_type = "text/plain"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._dispatch()

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        self._dispatch()

    def _dispatch(self) -> None:
        if self.command not in self.methods:
            self.send_error(HTTPStatus.NOT_IMPLEMENTED, f"Unsupported method ({self.command!r})")
            return
        try:
            self._serve()
        except DISCONNECTS:
            pass

    def _serve(self) -> None:
        raise NotImplementedError

    def lowered_headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def _apply(self, behaviour: Behaviour | None, release: threading.Event) -> bool:
        """Answer as `behaviour` says; False when the normal answer should follow (none, or a slow one)."""
        if behaviour is None:
            return False
        p = behaviour.params
        if behaviour.kind == "status":
            self._send(p["status"], self.failure_body, self.failure_type, p["headers"])
        elif behaviour.kind == "body":
            self._send(p["status"], p["body"], p["content_type"])
        elif behaviour.kind == "redirect":
            self._send(p["status"], b"", "text/plain", {"Location": p["location"]})
        elif behaviour.kind == "trickle":
            self._send(200, p["body"], "application/json", trickle=p["interval"], release=release)
        elif behaviour.kind == "oversized":
            self._stream(p["size"], p["content_length"])
        elif behaviour.kind == "slow":
            return release.wait(p["seconds"])  # reset while waiting: drop the connection
        else:
            return False
        return True

    def _not_found(self) -> None:
        self._send(404, b'{"error":"not found"}', "application/json")

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None, *,
              trickle: float = 0.0, release: threading.Event | None = None) -> None:
        """Send the whole answer, or with `trickle` one byte of the body per `trickle` seconds until `release`."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if not trickle:
            self.wfile.write(body)
            return
        for i in range(len(body)):
            self.wfile.write(body[i:i + 1])
            self.wfile.flush()
            if release is not None and release.wait(trickle):
                return  # reset: stop sending

    def _stream(self, size: int, content_length: bool, *, status: int = 200, content_type: str = "text/html",
                headers: dict[str, str] | None = None, filler: bytes = b"x") -> None:
        """Send `size` bytes of `filler` in 64 KB chunks (Content-Length only if `content_length`), recording
        the progress in `owner.streams`."""
        record = StreamRecord(total=size)
        with self.owner._lock:
            self.owner.streams.append(record)
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if content_length:
                self.send_header("Content-Length", str(size))
            self.end_headers()
            chunk = filler * 65536
            while record.sent < size:
                part = chunk[: size - record.sent]
                self.wfile.write(part)
                record.sent += len(part)
        except DISCONNECTS:
            record.aborted = True
        finally:
            record.done.set()


class FakeServer:
    handler: type[FakeHandler] = FakeHandler
    thread_name = "fake-server"

    def __init__(self, tls_context: ssl.SSLContext | None = None) -> None:
        self._tls = tls_context
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._release = threading.Event()
        self.reset()

    # lifecycle
    def start(self) -> Self:
        handler = type("Handler", (self.handler,), {"owner": self, "server_version": f"{type(self).__name__}/1.0"})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._server.handle_error = lambda request, client_address: None  # client disconnects are expected
        if self._tls is not None:
            self._server.socket = self._tls.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, name=self.thread_name, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._release.set()
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def reset(self) -> None:
        """Forget programmed answers and recorded requests; wake up any slow answer still waiting."""
        with self._lock:
            self._release.set()
            self._release = threading.Event()
            self._behaviours: dict[Hashable, list[Behaviour]] = {}
            self._requests: list[Any] = []
            self.streams: list[StreamRecord] = []
            self._clear()

    def _clear(self) -> None:
        """Reset the subclass's own state (called under the lock)."""

    # programmed behaviours
    def _queue_behaviour(self, key: Hashable, kind: str, times: int | None, **params: Any) -> None:
        with self._lock:
            self._behaviours.setdefault(key, []).append(Behaviour(kind, times, params))

    # observations
    @property
    def requests(self) -> list[Any]:
        with self._lock:
            return list(self._requests)

    # used by the handler
    def _record(self, request: Any) -> None:
        """Keep `request` (called under the lock)."""
        self._requests.append(request)

    def _state(self, key: Hashable) -> Any:
        """What the handler needs besides the behaviour, read under the lock."""
        return None

    def _take(self, request: Any, key: Hashable = None) -> tuple[Behaviour | None, Any, threading.Event]:
        """Record `request`, consume one use of the first behaviour queued for `key`; also the state and
        the event that `reset` sets."""
        with self._lock:
            self._record(request)
            queue = self._behaviours.get(key) or []
            behaviour = queue[0] if queue else None
            if behaviour is not None and behaviour.remaining is not None:
                behaviour.remaining -= 1
                if behaviour.remaining <= 0:
                    queue.pop(0)
            return behaviour, self._state(key), self._release


def singleton(cls: type[F]) -> Callable[[], F]:
    """A getter for the process-wide `cls` server, started on first use and stopped at exit."""
    instance: F | None = None
    lock = threading.Lock()

    def get() -> F:
        nonlocal instance
        with lock:
            if instance is None:
                instance = cls().start()
                atexit.register(instance.stop)
            return instance

    get.__doc__ = f"The process-wide {cls.__name__}, started on first use and stopped at exit."
    return get


def fixture_for(getter: Callable[[], F], name: str) -> Any:
    """A pytest fixture `name` yielding the shared fake from `getter`, reset before and after the test."""

    def fixture() -> Iterator[F]:
        fake = getter()
        fake.reset()
        yield fake
        fake.reset()

    fixture.__name__ = fixture.__qualname__ = name
    fixture.__doc__ = "The shared fake, reset before and after the test."
    return pytest.fixture(name=name)(fixture)


__all__ = ["DISCONNECTS", "Behaviour", "FakeHandler", "FakeServer", "RecordedRequest", "StreamRecord", "configured",
           "fixture_for", "singleton"]


class AnyPathAnswers:
    """Programmed answers on one queue for every path (a FakeServer mixin for single-endpoint services)."""

    def fail(self, status: int, times: int | None = 1, headers: dict[str, str] | None = None) -> None:
        self._queue_behaviour(None, "status", times, status=status, headers=headers or {})

    def answer(self, body: bytes, status: int = 200, times: int | None = 1,
               content_type: str = "application/json") -> None:
        self._queue_behaviour(None, "body", times, status=status, body=body, content_type=content_type)

    def redirect(self, location: str, status: int = 302, times: int | None = None) -> None:
        self._queue_behaviour(None, "redirect", times, status=status, location=location)

    def slow(self, seconds: float, times: int | None = 1) -> None:
        self._queue_behaviour(None, "slow", times, seconds=seconds)

    def trickle(self, body: bytes, interval: float, times: int | None = 1) -> None:
        self._queue_behaviour(None, "trickle", times, body=body, interval=interval)
