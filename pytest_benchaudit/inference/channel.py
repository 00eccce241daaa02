"""The framing between the pytest process and the inference process (:mod:`.process`, :mod:`.child`).

Light on purpose: :mod:`.prestart` uses it before pytest has loaded the rest of the plugin.
"""

from __future__ import annotations

import pickle
import select
import socket

__all__ = ["BUFFER", "PROTOCOL", "Channel", "Failed", "socket_pair"]

PROTOCOL = pickle.HIGHEST_PROTOCOL
BUFFER = 1 << 20  # socket buffers, and the most read at once


def socket_pair() -> tuple[socket.socket, socket.socket]:
    """(parent's end, child's end), with buffers large enough for a batch of answers."""
    parent, child = socket.socketpair()
    for sock in (parent, child):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER)
    return parent, child


class Channel:
    """Length-prefixed byte messages over a stream socket, read in large chunks: one system call
    brings every message waiting (a run's ~15,000 answers arrive in ~10,000 small writes; reading
    each as its own two reads cost the pytest process ~1 s)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = bytearray()

    def send(self, data: bytes) -> None:
        self.sock.sendall(len(data).to_bytes(4, "big") + data)

    def receive(self, *, block: bool, timeout: float | None = None) -> list[bytes]:
        """The complete messages read so far; with ``block``, at least one (waiting for it; with a
        ``timeout``, at most that many seconds, and then perhaps none).
        Raises ``EOFError`` when the other side has closed."""
        out: list[bytes] = []
        while True:
            out.extend(self._complete())
            if out or not (block or self._readable()):
                return out
            if block and timeout is not None and not self._readable(timeout):
                return out
            chunk = self.sock.recv(BUFFER)
            if not chunk:
                raise EOFError("the other side closed the socket")
            self._buffer += chunk
            block = False  # one read waited; what else is there is taken without waiting

    def _readable(self, wait: float = 0) -> bool:
        return bool(select.select([self.sock], [], [], wait)[0])

    def _complete(self) -> list[bytes]:
        buf, start, out = self._buffer, 0, []
        while len(buf) - start >= 4:
            size = int.from_bytes(buf[start : start + 4], "big")
            if len(buf) - start - 4 < size:
                break
            out.append(bytes(buf[start + 4 : start + 4 + size]))
            start += 4 + size
        if start:
            del buf[:start]
        return out

    def close(self) -> None:
        self.sock.close()


class Failed:
    """A generation that raised in the child (a backend bug), carried back as its text."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message
