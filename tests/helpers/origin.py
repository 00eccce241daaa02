"""A stdlib HTTP origin on 127.0.0.1 for the tests of `benchaudit fetch` and the demo's data step: no test
touches the real network."""

from __future__ import annotations

import http.server
import threading


class Origin:
    """A stdlib HTTP server on 127.0.0.1 serving ``routes`` (URL path -> bytes); logs requests."""

    def __init__(self) -> None:
        self.routes: dict[str, bytes] = {}
        self.requests: list[str] = []
        origin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                origin.requests.append(self.path)
                body = origin.routes.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/base/"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> Origin:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
