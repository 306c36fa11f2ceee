"""Byte-capped capture of a program's output streams.

A sandboxed program may print gigabytes; the host keeps at most ``cap`` bytes per stream
and drops the rest as it arrives, remembering only that it did.
"""

from __future__ import annotations


class CappedBuffer:
    """Accumulates at most ``cap`` bytes; everything after that is counted and discarded."""

    def __init__(self, cap: int) -> None:
        self.cap = max(0, cap)
        self._chunks: list[bytes] = []
        self._kept = 0
        self.total_bytes = 0

    @property
    def truncated(self) -> bool:
        return self.total_bytes > self._kept

    def feed(self, data: bytes) -> None:
        self.total_bytes += len(data)
        room = self.cap - self._kept
        if room <= 0 or not data:
            return
        kept = data[:room]
        self._chunks.append(kept)
        self._kept += len(kept)

    def drop_tail(self, count: int) -> None:
        """Forget the last ``count`` bytes of the stream (a trailer that was never output)."""
        self.total_bytes = max(0, self.total_bytes - count)
        excess = self._kept - self.total_bytes
        while excess > 0 and self._chunks:
            last = self._chunks[-1]
            if len(last) <= excess:
                self._chunks.pop()
                self._kept -= len(last)
                excess -= len(last)
            else:
                self._chunks[-1] = last[: len(last) - excess]
                self._kept -= excess
                excess = 0

    def text(self) -> str:
        # A cut can land inside a multi-byte character; replacing it beats raising.
        return b"".join(self._chunks).decode("utf-8", errors="replace")
