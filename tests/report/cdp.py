"""Drive headless Debian chromium over the DevTools protocol on a pipe (no extra packages).

``--remote-debugging-pipe`` makes chromium read commands on fd 3 and write replies on fd 4,
each a JSON message ended by a NUL byte. That is all a test needs: navigate, evaluate,
collect console errors and network requests, take screenshots.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
)


class BrowserError(RuntimeError):
    pass


class Chromium:
    """One headless chromium with one page, closed on exit. Bounded waits everywhere."""

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        self.profile = tempfile.mkdtemp(prefix="proctor-chromium-")
        to_child_read, self._to_child = os.pipe()
        self._from_child, from_child_write = os.pipe()
        # Park the child's ends above 3 and 4 so dup2 onto 3/4 never collides with them.
        child_read = fcntl.fcntl(to_child_read, fcntl.F_DUPFD, 10)
        child_write = fcntl.fcntl(from_child_write, fcntl.F_DUPFD, 10)
        os.close(to_child_read)
        os.close(from_child_write)

        def wire_pipes() -> None:  # runs in the child between fork and exec; dup2 clears CLOEXEC
            os.dup2(child_read, 3)
            os.dup2(child_write, 4)

        self.process = subprocess.Popen(
            [
                shutil.which("chromium") or "chromium",
                *CHROMIUM_FLAGS,
                f"--user-data-dir={self.profile}",
                "--remote-debugging-pipe",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire_pipes,
            close_fds=False,
        )
        os.close(child_read)
        os.close(child_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        try:
            self.session = self._attach_page()
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.send(f"{domain}.enable")
            self.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            )
        except BaseException:
            # No `with` block owns the browser yet: stop it here, or it outlives the test.
            self.close()
            raise

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.send("Browser.close", session=False, timeout=5)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        for fd in (self._to_child, self._from_child):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    # -- protocol -----------------------------------------------------------------------
    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise BrowserError("chromium did not answer in time")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise BrowserError("chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: bool = True,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and getattr(self, "session", None):
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self.events.append(reply)

    def _attach_page(self) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            targets = self.send("Target.getTargets", session=False)["targetInfos"]
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                reply = self.send(
                    "Target.attachToTarget",
                    {"targetId": pages[0]["targetId"], "flatten": True},
                    session=False,
                )
                return str(reply["sessionId"])
            time.sleep(0.1)
        raise BrowserError("chromium opened no page")

    # -- conveniences -------------------------------------------------------------------
    def evaluate(self, expression: str, *, await_promise: bool = False) -> Any:
        reply = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": await_promise},
        )
        if "exceptionDetails" in reply:
            raise BrowserError(f"page threw: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def navigate(self, url: str, *, ready_expression: str, timeout: float = 60.0) -> None:
        self.events.clear()
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.evaluate(f"Boolean({ready_expression})"):
                return
            time.sleep(0.05)
        raise BrowserError(f"page at {url} never became ready ({ready_expression})")

    def console_errors(self) -> list[str]:
        errors = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                errors.append(json.dumps(params.get("exceptionDetails", {}))[:500])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                errors.append(str(params["entry"].get("text")))
        return errors

    def requested_urls(self) -> list[str]:
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            metrics = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params.update(
                captureBeyondViewport=True,
                clip={
                    "x": 0,
                    "y": 0,
                    "width": metrics["width"],
                    "height": min(metrics["height"], 6000),
                    "scale": 1,
                },
            )
        data = self.send("Page.captureScreenshot", params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path
