"""A raw HTTP/1.1 client for the worker's tests: bytes sent as given, answers read off the socket one by one."""
from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field


@dataclass
class Answer:
    status: int
    headers: dict  # lower-cased names
    body: bytes
    at: float = field(default=0.0)  # time.monotonic() when it was whole

    def closes(self) -> bool:
        return self.headers.get("connection", "").lower() == "close"


class Reader:
    """Answers off one socket, in order; 1xx answers are answers too (they have no body)."""

    def __init__(self, sock: socket.socket):
        self.sock, self.data, self.eof = sock, b"", False

    def _more(self, deadline: float) -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or self.eof:
            return False
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            return False
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.data += chunk
        return True

    def answer(self, timeout: float = 10.0) -> Answer | None:
        """The next answer, or None when the connection ended (or nothing came within `timeout`)."""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.data:
            if not self._more(deadline):
                return None
        head, _, rest = self.data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        if status < 200 or status in (204, 304):
            self.data = rest
            return Answer(status, headers, b"", time.monotonic())
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body, pos = b"", 0
            while True:
                while b"\r\n" not in rest[pos:]:
                    if not self._more(deadline):
                        return None
                    rest = self.data.partition(b"\r\n\r\n")[2]
                line_end = rest.index(b"\r\n", pos)
                size = int(rest[pos:line_end].split(b";")[0], 16)
                while len(rest) < line_end + 2 + size + 2:
                    if not self._more(deadline):
                        return None
                    rest = self.data.partition(b"\r\n\r\n")[2]
                body += rest[line_end + 2:line_end + 2 + size]
                pos = line_end + 2 + size + 2
                if size == 0:
                    self.data = rest[pos:]
                    return Answer(status, headers, body, time.monotonic())
        if "content-length" in headers:
            length = int(headers["content-length"])
            while len(rest) < length:
                if not self._more(deadline):
                    return None
                rest = self.data.partition(b"\r\n\r\n")[2]
            self.data = rest[length:]
            return Answer(status, headers, rest[:length], time.monotonic())
        while self._more(deadline):  # until the connection ends
            pass
        body, self.data = self.data.partition(b"\r\n\r\n")[2], b""
        return Answer(status, headers, body, time.monotonic())

    def closed(self, within: float) -> bool:
        """True when the server ends the connection within `within` seconds with nothing more to read."""
        deadline = time.monotonic() + within
        while not self.eof and self._more(deadline):
            pass
        return self.eof and not self.data


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def exchange(port: int, data: bytes, timeout: float = 5.0) -> tuple[list[Answer], bool]:
    """Send `data` on a new connection; every answer until the connection ends or `timeout` passes without one,
    and whether the server closed the connection."""
    with connect(port) as sock:
        sock.sendall(data)
        reader, answers = Reader(sock), []
        while (answer := reader.answer(timeout)) is not None:
            answers.append(answer)
        return answers, reader.eof


def get(path: str, *headers: str) -> bytes:
    return ("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n" % (path, "".join(h + "\r\n" for h in headers))).encode()
