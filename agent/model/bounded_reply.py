"""A bound on how many bytes an endpoint's reply may occupy, after decompression.

The HTTP library reads a whole non-streamed reply into memory, and decompresses gzip or deflate
bodies on the way: a hostile server can send a gigabyte, or a few megabytes of gzip that expand
to tens of gigabytes, and the run process dies of memory with every sample in flight. A response
hook of the SDK's own HTTP client wraps each reply's byte stream before it is read: it counts the
bytes, decompresses gzip and deflate itself with a bounded output, and fails the exchange with
:class:`~proctor.agent.model.retry.FailedReply` past ``MAX_REPLY_BYTES``. Other encodings (br,
zstd), which Proctor never asks for, are refused rather than decoded without a bound.
"""

from __future__ import annotations

import functools
import sys
import zlib
from collections.abc import AsyncIterator
from typing import Any

from proctor.agent.model.retry import FailedReply

# Far above any real reply (the fuzz tests send 10 MB strings, about 18 MB of JSON once escaped),
# far below what would take the run process down.
MAX_REPLY_BYTES = 128 * 1024 * 1024
# What Proctor asks for: the encodings it can decode with a bound.
ACCEPTED_ENCODINGS = "gzip, deflate"


class _BoundedStream:
    """The reply's raw byte stream, decoded and counted (mixed into the HTTP library's own
    ``AsyncByteStream`` by :func:`_stream_class`, so the library treats it as its own)."""

    def __init__(self, inner: Any, encoding: str, limit: int) -> None:
        self._inner = inner
        self._encoding = encoding
        self._limit = limit
        self._decoder: Any = None
        if encoding in ("gzip", "x-gzip"):
            self._decoder = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif encoding == "deflate":
            self._decoder = zlib.decompressobj(zlib.MAX_WBITS)

    def _too_big(self) -> FailedReply:
        return FailedReply(f"the reply is larger than {self._limit:,} bytes")

    def _decode(self, chunk: bytes, room: int) -> bytes:
        try:
            out: bytes = self._decoder.decompress(chunk, room + 1)
        except zlib.error:
            if self._encoding != "deflate" or self._decoder.total_in:
                raise FailedReply(f"the reply's {self._encoding} body is corrupt") from None
            # Some servers send raw deflate without the zlib header (as the HTTP library allows).
            self._decoder = zlib.decompressobj(-zlib.MAX_WBITS)
            return self._decode(chunk, room)
        if self._decoder.unconsumed_tail:
            raise self._too_big()
        return out

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        async for chunk in self._inner:
            if self._decoder is not None:
                chunk = self._decode(chunk, self._limit - total)
            total += len(chunk)
            if total > self._limit:
                raise self._too_big()
            yield chunk
        if self._decoder is not None:
            tail = self._decoder.flush()
            total += len(tail)
            if total > self._limit:
                raise self._too_big()
            if tail:
                yield tail

    async def aclose(self) -> None:
        await self._inner.aclose()


@functools.cache
def _stream_class(library_name: str) -> type[_BoundedStream]:
    # The SDK's HTTP library (httpx, or httpx2 in newer SDKs) is the package the response's class
    # comes from; its AsyncByteStream is the base class it checks streams against.
    library = sys.modules[library_name]
    base: type = library.AsyncByteStream
    return type("BoundedReplyStream", (_BoundedStream, base), {})


async def ask_for_boundable_encodings(request: Any) -> None:
    """Request hook: ask only for the encodings :class:`_BoundedStream` decodes."""
    request.headers["Accept-Encoding"] = ACCEPTED_ENCODINGS


def bound_reply(limit: int = MAX_REPLY_BYTES) -> Any:
    """A response hook for the SDK's HTTP client that bounds every reply to ``limit`` bytes."""

    async def hook(response: Any) -> None:
        encoding = response.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
            await response.aclose()
            raise FailedReply(f"the reply uses content-encoding {encoding[:40]!r}, which was not asked for")
        # Checked before a byte of the body is read: a declared size past the limit is refused.
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await response.aclose()
            raise FailedReply(f"the reply is larger than {limit:,} bytes ({int(declared):,} declared)")
        library = type(response).__module__.split(".")[0]
        response.stream = _stream_class(library)(response.stream, encoding, limit)
        if encoding not in ("", "identity"):
            # Decoded above, with the bound; the HTTP library must not decode it again.
            del response.headers["content-encoding"]

    return hook
