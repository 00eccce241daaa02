"""A scripted OpenAI-compatible HTTP server for tests, fault injection and benchmarks.

The server speaks just enough of the OpenAI API for the plugin's backends:

* ``GET  /v1/models``            -> ``{"object": "list", "data": [{"id": model_id, "object": "model"}]}``
* ``POST /v1/chat/completions``  -> a chat completion (``choices[0].message``)
* ``POST /v1/completions``       -> a legacy text completion (``choices[0].text``)
* with a ``tokenizer`` (:class:`~.scripted_tokenizer.ScriptedTokenizer`): vLLM's tokenizer routes at
  the server's root, ``GET /tokenizer_info``, ``POST /tokenize``, ``POST /detokenize`` (what lm-eval's
  API models ask), and echoed prompts cut by it
* anything else                  -> 404 with an OpenAI-style JSON error body

What each completion request gets back is decided by a *script*: a callable that
receives a :class:`Call` (path, parsed body, headers, attempt number) and returns
a :class:`Reply` (content, reasoning, finish reason, HTTP status, extra headers,
delay, raw bytes, dropped connection, first-token log-probabilities, usage, the ``model``
the reply names, a body cut mid-stream, a body that stalls half-way).

Before the script runs, two built-in checks answer HTTP 400 on their own:

* the request body is not a JSON object;
* ``min_max_tokens`` is set and the request's ``max_tokens`` (or
  ``max_completion_tokens``) is below it -- the Azure-style refusal
  ``{"error": {"message": "max_tokens is too small. Minimum value is N.", ...}}``.

Design (why it looks like this):

* ``ThreadingHTTPServer`` with HTTP/1.1 keep-alive: one daemon thread per
  connection, so a request's ``delay`` sleeps only its own thread and 32
  concurrent clients are served concurrently.  The listen backlog is 1024 because
  the default of 5 makes the kernel reset connections under a burst of 32.
* Each response is written with a single ``sendall`` (status line, headers and
  body together) and ``TCP_NODELAY`` is set: a header write followed by a body
  write would otherwise meet Nagle's algorithm plus delayed ACKs and add ~40 ms
  to every keep-alive request, which would swamp a 20 ms benchmark latency.
* ``stop()`` wakes sleeping handlers and shuts down open keep-alive sockets, so a
  stopped server really stops answering and its threads go away promptly.

Command line (used by the benchmarks and by stand-in executables)::

    python -m pytest_benchaudit.testing.scripted_server --port 0 --latency 0.02 \\
        [--answer "Answer: A"] [--model-id NAME] [--min-max-tokens 16]

prints one line ``READY http://127.0.0.1:PORT/v1`` (flushed) once listening and
serves until SIGTERM or SIGINT, then exits with status 0.

The values and script builders live in :mod:`.scripts`, the response bodies in :mod:`.responses`;
they are re-exported here, where tests have always imported them from.

Why ~500 lines: the HTTP server, its handler and the fault behaviours a reply can ask for
(delays, dropped connections, raw bytes, status codes, keys) are one state machine; split
further, each part would need the others' internals.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any

from pytest_benchaudit.testing.responses import (
    chat_logprobs,
    completion_logprobs,
    count_words,
    echo_pieces,
    echoed_logprobs,
    error_body,
    prompt_words,
)
from pytest_benchaudit.testing.scripted_tokenizer import ScriptedTokenizer
from pytest_benchaudit.testing.scripts import (
    Call,
    Reply,
    Script,
    by_marker,
    default_script,
    sequence,
    text_of,
)

__all__ = ["Call", "Reply", "Script", "ScriptedServer", "by_marker", "main", "sequence", "serve_until_signal"]


# --------------------------------------------------------------------------- server


class _Response:
    """A fully built response, written with one ``sendall``."""

    __slots__ = ("status", "body", "content_type", "headers", "cut_after", "stall")

    def __init__(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
        *,
        cut_after: int | None = None,
        stall: float | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = dict(headers or {})
        self.cut_after = cut_after  # bytes of the body sent before the connection is closed
        self.stall = stall  # seconds to wait after the first half of the body


def _json_response(status: int, obj: Any, headers: Mapping[str, str] | None = None) -> _Response:
    return _Response(status, json.dumps(obj).encode("utf-8"), "application/json", headers)


class _HTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with a deep backlog, quiet disconnect handling and a back-pointer."""

    # The default backlog of 5 makes the kernel refuse/reset connections when 32
    # clients connect at once.
    request_queue_size = 1024
    daemon_threads = True
    allow_reuse_address = True
    owner: ScriptedServer

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse DNS lookup that
        # can stall for seconds on machines without working DNS; we never need it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that vanish mid-request (timeouts, fault tests, stop()) are
        # normal here; anything else is a server bug worth a traceback.
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, OSError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every response carries Content-Length
    server_version = "ScriptedServer/1"
    sys_version = ""
    disable_nagle_algorithm = True  # see module docstring: avoids ~40 ms Nagle/delayed-ACK stalls
    server: _HTTPServer

    # -- connection bookkeeping so that stop() can close idle keep-alive sockets

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # silent: tests and benchmarks would drown in access logs

    # -- HTTP verbs

    def do_GET(self) -> None:
        self._serve(b"")

    def do_POST(self) -> None:
        body = self._read_body()
        if body is None:
            return
        self._serve(body)

    # -- plumbing

    def _read_body(self) -> bytes | None:
        """Read the request body (Content-Length or chunked); ``None`` if the connection failed."""
        try:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                chunks: list[bytes] = []
                while True:
                    size_line = self.rfile.readline(65537)
                    size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        # trailer section ends with an empty line
                        while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                            pass
                        break
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline(65537)  # CRLF after the chunk
                return b"".join(chunks)
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length > 0 else b""
        except (ValueError, OSError):
            self.close_connection = True
            return None

    def _serve(self, raw: bytes) -> None:
        owner = self.server.owner
        path = self.path.split("?", 1)[0]
        if len(path) > 1:
            path = path.rstrip("/")
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        result = owner._respond(self.command, path, raw, headers)
        if result is None:  # drop_connection
            self._drop()
            return
        self._write(result)

    def _write(self, response: _Response) -> None:
        reason = self.responses.get(response.status, ("",))[0]
        lines = [
            f"HTTP/1.1 {response.status} {reason}",
            f"Server: {self.server_version}",
            f"Content-Type: {response.content_type}",
            f"Content-Length: {len(response.body)}",
        ]
        lines.extend(f"{name}: {value}" for name, value in response.headers.items())
        if self.close_connection:
            lines.append("Connection: close")
        else:
            lines.append("Connection: keep-alive")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        try:
            if response.cut_after is not None:  # the announced body is never completed
                self.wfile.write(head + response.body[: response.cut_after])
                self.wfile.flush()
                self._drop()
                return
            if response.stall is not None:
                half = len(response.body) // 2
                self.wfile.write(head + response.body[:half])
                self.wfile.flush()
                if self.server.owner._stopping.wait(response.stall):
                    self._drop()  # server stopping: do not finish late
                    return
                self.wfile.write(response.body[half:])
                return
            self.wfile.write(head + response.body)
        except OSError:
            self.close_connection = True

    def _drop(self) -> None:
        """Close the socket without a byte of response (client sees a disconnect)."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class ScriptedServer:
    """An OpenAI-compatible HTTP server whose answers come from a script.

    ``script``          decides each completion reply; ``None`` answers ``Reply()`` to everything.
    ``latency``         default seconds to hold each request (a reply's ``delay`` overrides it).
    ``model_id``        listed by ``/v1/models`` and reported as ``model`` in every completion.
    ``min_max_tokens``  when set, a request whose ``max_tokens``/``max_completion_tokens`` is
                        below it gets the Azure-style HTTP 400 (before the script runs).
    ``host``/``port``   where to listen; port 0 picks a free port (see :attr:`url`).
    ``tokenizer``       serves the tokenizer routes and cuts echoed prompts (see the module).

    ``calls`` records every request that reached routing (including ``GET /v1/models``,
    404s and ``min_max_tokens`` refusals), in arrival order; requests whose body was not
    a JSON object are refused with 400 and not recorded (they have no ``body`` to give).
    ``script_errors`` collects exceptions raised by the script (each answered with 500).

    Use as a context manager or call :meth:`start` / :meth:`stop`.
    """

    def __init__(
        self,
        script: Script | None = None,
        *,
        latency: float = 0.0,
        model_id: str = "scripted-model",
        min_max_tokens: int | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        tokenizer: ScriptedTokenizer | None = None,
    ) -> None:
        self.script: Script = script or default_script
        self.tokenizer = tokenizer
        # When set, every request must carry `Authorization: Bearer <api_key>` (else HTTP 401), as
        # `vllm serve --api-key` and llama-cpp-python's `api_key` setting require.
        self.api_key = api_key
        self.latency = latency
        self.model_id = model_id
        self.min_max_tokens = min_max_tokens
        self.host = host
        self.port = port
        self.calls: list[Call] = []
        self.script_errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._attempts: dict[tuple[str, str], int] = {}
        self._ids = itertools.count(1)
        self._conns: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    @property
    def url(self) -> str:
        """Base URL ending in ``/v1``, e.g. ``http://127.0.0.1:43123/v1`` (after :meth:`start`)."""
        if self._httpd is None:
            raise RuntimeError("ScriptedServer is not started")
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> ScriptedServer:
        """Bind, start serving in a daemon thread and return ``self``."""
        if self._httpd is not None:
            raise RuntimeError("ScriptedServer is already started")
        self._stopping.clear()
        httpd = _HTTPServer((self.host, self.port), _Handler)
        httpd.owner = self
        self.port = httpd.server_address[1]
        self._httpd = httpd
        # A short poll interval keeps stop() fast (serve_forever checks it between polls).
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"ScriptedServer:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: no new connections, sleeping requests are dropped, open sockets closed."""
        httpd = self._httpd
        if httpd is None:
            return
        self._stopping.set()  # wakes handlers sleeping out a delay; they then drop their connection
        httpd.shutdown()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # unblocks handler threads waiting for the next request
            except OSError:
                pass
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    # -- request handling (runs in the connection's handler thread)

    def _record(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> Call:
        key = (path, json.dumps(body, sort_keys=True, separators=(",", ":")))
        with self._lock:
            attempt = self._attempts.get(key, 0) + 1
            self._attempts[key] = attempt
            call = Call(path=path, body=body, headers=headers, attempt=attempt)
            self.calls.append(call)
        return call

    def _respond(self, method: str, path: str, raw: bytes, headers: dict[str, str]) -> _Response | None:
        """Build the response for one request; ``None`` means drop the connection."""
        if raw.strip():
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as exc:
                return _json_response(400, error_body(400, f"invalid JSON body: {exc}"))
            if not isinstance(body, dict):
                return _json_response(400, error_body(400, "request body must be a JSON object"))
        else:
            body = {}
        call = self._record(path, body, headers)

        if self.api_key is not None and path.startswith("/v1/"):  # as vLLM: /health stays open
            sent = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
            if sent != f"Bearer {self.api_key}":
                return _json_response(401, error_body(401, "invalid or missing API key"))
        tokenizer_route = self.tokenizer.answer(method, path, body) if self.tokenizer is not None else None
        if tokenizer_route is not None:
            return _json_response(*tokenizer_route)
        if method == "GET" and path == "/v1/models":
            return _json_response(
                200,
                {
                    "object": "list",
                    "data": [{"id": self.model_id, "object": "model", "created": 0, "owned_by": "scripted"}],
                },
            )
        if method != "POST" or path not in ("/v1/chat/completions", "/v1/completions"):
            return _json_response(404, error_body(404, f"no route for {method} {path}"))

        refusal = self._check_max_tokens(body)
        if refusal is not None:
            return refusal

        try:
            reply = self.script(call)
        except Exception as exc:  # a broken script must not hang or kill the client
            with self._lock:
                self.script_errors.append(exc)
            return _json_response(500, error_body(500, f"script raised {type(exc).__name__}: {exc}"))

        delay = reply.delay if reply.delay is not None else self.latency
        if delay > 0 and self._stopping.wait(delay):
            return None  # server stopping: do not answer late
        if reply.drop_connection:
            return None
        if reply.raw_body is not None:
            return _Response(reply.status, reply.raw_body, reply.content_type, reply.headers)
        if reply.status != 200:
            return _Response(
                reply.status,
                json.dumps(error_body(reply.status, reply.error_message)).encode(),
                reply.content_type,
                reply.headers,
            )
        chat = path == "/v1/chat/completions"
        payload = self._completion(chat, body, reply)
        return _Response(
            200,
            json.dumps(payload).encode("utf-8"),
            reply.content_type,
            reply.headers,
            cut_after=reply.cut_body_after,
            stall=reply.stall_body,
        )

    def _check_max_tokens(self, body: Mapping[str, Any]) -> _Response | None:
        if self.min_max_tokens is None:
            return None
        for param in ("max_tokens", "max_completion_tokens"):
            value = body.get(param)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < self.min_max_tokens:
                message = f"{param} is too small. Minimum value is {self.min_max_tokens}."
                return _json_response(
                    400,
                    error_body(
                        400, message, param=param, code="integer_below_min_value", type_="invalid_request_error"
                    ),
                )
        return None

    def _completion(self, chat: bool, body: Mapping[str, Any], reply: Reply) -> dict[str, Any]:
        n = next(self._ids)
        usage = reply.usage
        if usage is None:
            prompt_tokens = prompt_words(body)
            completion_tokens = count_words(reply.content) + count_words(reply.reasoning_content if chat else None)
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
        choice: dict[str, Any] = {"index": 0}
        if chat:
            message: dict[str, Any] = {"role": "assistant", "content": reply.content}
            if reply.reasoning_content is not None:
                message["reasoning_content"] = reply.reasoning_content
            choice["message"] = message
            logprobs = chat_logprobs(body, reply.top_logprobs or {})
        elif body.get("echo") is True and not reply.ignore_echo:  # the prompt comes back before the answer
            prompt = text_of(body.get("prompt"))
            generated = (reply.content or "") if reply.echo_generated else ""
            choice["text"] = prompt + generated
            pieces = self.tokenizer.pieces if self.tokenizer is not None else echo_pieces
            logprobs = echoed_logprobs(body, prompt, generated, reply.continuation_logprob, pieces)
        else:
            choice["text"] = reply.content
            logprobs = completion_logprobs(body, reply.top_logprobs or {})
        choice["logprobs"] = logprobs
        choice["finish_reason"] = reply.finish_reason
        return {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-scripted-{n}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.model_id if reply.model is None else reply.model,
            "choices": [choice],
            "usage": usage,
        }


# --------------------------------------------------------------------------- command line


class _Terminate(Exception):
    """Raised from the signal handler to leave the main thread's wait."""


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise _Terminate(signum)


def serve_until_signal(server: ScriptedServer) -> int:
    """Start ``server``, print ``READY URL`` (flushed), serve until SIGTERM or SIGINT, stop; exit status 0."""
    # Handlers go in before READY so a signal sent right after READY is honoured.
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        server.start()
        print(f"READY {server.url}", flush=True)
        while True:
            time.sleep(3600)  # interrupted by the signal handler's exception
    except _Terminate:
        pass
    finally:
        # Ignore further signals while shutting down so a second SIGTERM cannot
        # interrupt the cleanup with a traceback.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        server.stop()
    return 0


def main(argv: Iterable[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT; print ``READY <url>`` once listening.  Returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_benchaudit.testing.scripted_server",
        description="Scripted OpenAI-compatible server answering every completion with a fixed reply.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds to hold each request")
    parser.add_argument("--answer", default="Answer: A", help="content of every reply")
    parser.add_argument("--model-id", default="scripted-model")
    parser.add_argument("--min-max-tokens", type=int, default=None)
    parser.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="require the key in $VAR as a bearer token (HTTP 401 otherwise)",
    )
    args = parser.parse_args(list(argv) if argv is not None else None)

    answer = Reply(content=args.answer)
    server = ScriptedServer(
        lambda call: answer,
        latency=args.latency,
        model_id=args.model_id,
        min_max_tokens=args.min_max_tokens,
        host=args.host,
        port=args.port,
        api_key=os.environ.get(args.api_key_env) if args.api_key_env else None,
    )
    return serve_until_signal(server)


if __name__ == "__main__":
    sys.exit(main())
