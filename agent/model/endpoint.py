"""Where a model lives and how many requests it may have open: shared by both API clients."""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
import sys
import weakref
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlparse, urlunparse

import openai

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import ModelConfig
from proctor.agent.model.bounded_reply import ask_for_boundable_encodings, bound_reply

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Provider prefixes in model names ("openai/gpt-5", "local/gemma3-270m"); the API sees the rest.
# Other slashes are kept: "meta-llama/Llama-3.1-8B" is a real model id on vLLM servers.
PROVIDER_PREFIXES = ("openai/", "local/")
# A local llama.cpp server accepts any key; the SDK just insists on having one.
PLACEHOLDER_KEY = "no-key-needed"
# The key variable a model reads unless it names another. Only this one may be unset (for
# self-hosted endpoints); a variable a config names on purpose is meant to hold a key.
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
# What run.json records for a local model: Proctor's own llama.cpp server, on a new port each time.
LOCAL_SERVER_URL = "local llama.cpp server (started by proctor)"

# One semaphore per (event loop, endpoint): asyncio primitives belong to one loop, and tests run
# many loops in one process. Weak keys let a finished loop's semaphores go with it.
_SEMAPHORES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


@functools.cache
def _shared_tls_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext | None:
    """The SDK's HTTP library's own default TLS context, built once per process and trust setting.

    Building one loads the system's CA bundle, tens of milliseconds of CPU, and every client
    built its own (a run builds one per model and judge, a benchmark one per scenario). An
    ``SSLContext`` is safe to share between clients. The arguments are the environment
    variables that library reads (``SSL_CERT_FILE``, ``SSL_CERT_DIR``), so a change to them
    gets a context of its own, as a new client would. None (each client builds its own, as
    before) for a library without ``create_ssl_context``.
    """
    library = sys.modules[type(openai.DEFAULT_CONNECTION_LIMITS).__module__.split(".")[0]]
    create = getattr(library, "create_ssl_context", None)
    return None if create is None else create()


def shared_tls_context() -> ssl.SSLContext | None:
    return _shared_tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


def api_model_name(name: str) -> str:
    for prefix in PROVIDER_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def is_local_model(name: str) -> bool:
    return name.startswith("local/")


def is_loopback(url: str) -> bool:
    host = urlparse(url).hostname or ""
    return host in {"127.0.0.1", "localhost", "::1"} or host.startswith("127.")


def configured_base_url(cfg: ModelConfig) -> str:
    """The base URL ``cfg`` talks to, after the environment: its ``base_url``, else
    ``OPENAI_BASE_URL``, else OpenAI's. Local models without a URL get their own server."""
    if cfg.base_url:
        return cfg.base_url.rstrip("/")
    if is_local_model(cfg.name):
        return LOCAL_SERVER_URL
    return (os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


# Query parameters that carry credentials in proxies' URLs (``?api_key=``, ``?token=``, ``?sig=``).
_SECRET_QUERY_NAMES = ("key", "token", "secret", "sig", "auth", "password", "credential")
REDACTED = "REDACTED"


def without_secrets(url: str) -> str:
    """``url`` fit for a record: user:password dropped, credential-like query values replaced.

    Other query parameters (``api-version``) stay: they say which endpoint was used.
    """
    parts = urlparse(url)
    if not parts.scheme or not parts.netloc:
        return url
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None:
        netloc += f":{port}"
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    query = urlencode(
        [
            (name, REDACTED if any(word in name.lower() for word in _SECRET_QUERY_NAMES) else value)
            for name, value in pairs
        ]
    )
    return urlunparse((parts.scheme, netloc, parts.path, parts.params, query, ""))


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    api_key: str
    max_connections: int
    timeout_s: float

    @classmethod
    def from_config(
        cls, cfg: ModelConfig, base_url_override: str | None = None, *, role: str = "model"
    ) -> Endpoint:
        """Resolve base URL (override, config, OPENAI_BASE_URL, OpenAI) and key (cfg.api_key_env).

        ``role`` ("model", "judge") names the entry in the one-line error a missing key gives.
        """
        base_url = base_url_override or cfg.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        if is_local_model(cfg.name) and not (base_url_override or cfg.base_url):
            raise UserError(
                f"model {cfg.name!r} is served by the local llama.cpp server, but no server URL was given"
            )
        api_key = os.environ.get(cfg.api_key_env)
        if not api_key:
            named = cfg.api_key_env != DEFAULT_KEY_ENV
            # Self-hosted and local servers usually need no key; OpenAI itself always does, and
            # a variable the config names on purpose is meant to hold one.
            keyless = is_local_model(cfg.name) or is_loopback(base_url) or base_url_override or cfg.base_url
            if keyless and not named:
                api_key = PLACEHOLDER_KEY
            else:
                hint = "" if named else " (or give the model a base_url)"
                raise UserError(
                    f"{role} {cfg.name!r}: the key variable {cfg.api_key_env} is not set; "
                    f"set it to the API key for {without_secrets(base_url)}{hint}"
                )
        return cls(base_url.rstrip("/"), api_key, cfg.max_connections, cfg.request_timeout_s)

    def semaphore(self) -> asyncio.Semaphore:
        """The connection limit shared by every client of this base URL in the running loop.

        The first client to ask sets its size; later clients share it as it is, because two
        limits on one endpoint would not be a limit.
        """
        per_loop = _SEMAPHORES.setdefault(asyncio.get_running_loop(), {})
        if self.base_url not in per_loop:
            per_loop[self.base_url] = asyncio.Semaphore(self.max_connections)
        return per_loop[self.base_url]

    def sdk_client(self) -> openai.AsyncOpenAI:
        """An AsyncOpenAI with its own retries off (ours count them) and a pool as wide as the limit."""
        # The SDK's own Limits class: its HTTP library differs across SDK versions (httpx, httpx2).
        limits_class = type(openai.DEFAULT_CONNECTION_LIMITS)
        limits = limits_class(
            max_connections=self.max_connections, max_keepalive_connections=self.max_connections
        )
        context = shared_tls_context()
        return openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=self.api_key,
            max_retries=0,
            timeout=self.timeout_s,
            http_client=openai.DefaultAsyncHttpxClient(
                limits=limits,
                # Every reply is bounded in bytes, after decompression (agent/model/bounded_reply.py).
                event_hooks={"request": [ask_for_boundable_encodings], "response": [bound_reply()]},
                # True (the library's default: a context of the client's own) only where
                # the library cannot build one to share.
                verify=True if context is None else context,
            ),
        )
