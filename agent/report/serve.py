"""Serve one rendered page on 127.0.0.1 (never on other interfaces) until interrupted."""

from __future__ import annotations

from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def make_server(page: Path, port: int) -> ThreadingHTTPServer:
    """A server answering GET / (and the file's own name) with ``page``; 404 for anything else."""
    body_path = page.resolve()
    served_paths = {"/", f"/{body_path.name}"}

    class PageHandler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] not in served_paths:
                self.send_error(HTTPStatus.NOT_FOUND)
                return
            # Read on each request so a re-rendered report shows up on reload.
            body = body_path.read_bytes()
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep the terminal for the address line

    return ThreadingHTTPServer(("127.0.0.1", port), PageHandler)
