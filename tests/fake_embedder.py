"""A tiny OpenAI-compatible ``POST /v1/embeddings`` server on 127.0.0.1 for the similarity tests: a hashed
bag of words (similar texts get similar vectors, fast and deterministic), and the texts it was sent."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np


def bag_of_words(text: str, dim: int = 64) -> list[float]:
    v = np.zeros(dim)
    for word in re.findall(r"[a-z]+", text.lower()):
        v[int(hashlib.sha256(word.encode()).hexdigest(), 16) % dim] += 1.0
    return list(v + 1e-3)


@contextmanager
def fake_embedder() -> Iterator[tuple[str, list[str]]]:
    """``fake@URL`` (an ``--embedder`` spec) and the list the texts it is sent are appended to."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.extend(body["input"])
            data = [{"index": i, "embedding": bag_of_words(t)} for i, t in enumerate(body["input"])]
            out = json.dumps({"data": data}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"fake@http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
