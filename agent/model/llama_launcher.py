"""Run llama-cpp-python's OpenAI-compatible server with a tool-calling format whose every
generation is bounded.

llama-cpp-python's ``chatml-function-calling`` handler generates tool-call arguments (and the
"auto" tool choice) with ``max_tokens=None``, i.e. until the context window is full. A small
model that loops inside a JSON string then holds the single-slot server for many minutes,
long after the client gave up. This launcher registers the same handler under
:data:`BOUNDED_FORMAT`, with every unbounded generation capped at the request's own
``max_tokens``, then starts the stock server:

    python -m proctor.agent.model.llama_launcher --model M.gguf
        --chat_format proctor-chatml-function-calling ...
"""

from __future__ import annotations

from typing import Any

BOUNDED_FORMAT = "proctor-chatml-function-calling"
# Used when a request sets no max_tokens; enough for a tool call on a small model.
FALLBACK_MAX_TOKENS = 512


class _BoundedLlama:
    """Forwards everything to the real model, but never lets a completion run unbounded."""

    def __init__(self, llama: Any, max_tokens: int) -> None:
        self._llama = llama
        self._max_tokens = max_tokens

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)

    def create_completion(self, *args: Any, **kwargs: Any) -> Any:
        requested = kwargs.get("max_tokens")
        if requested is None or requested <= 0 or requested > self._max_tokens:
            kwargs["max_tokens"] = self._max_tokens
        return self._llama.create_completion(*args, **kwargs)


def bounded_function_calling(llama: Any, **kwargs: Any) -> Any:
    from llama_cpp.llama_chat_format import chatml_function_calling

    requested = kwargs.get("max_tokens")
    cap = requested if isinstance(requested, int) and requested > 0 else FALLBACK_MAX_TOKENS
    return chatml_function_calling(llama=_BoundedLlama(llama, cap), **kwargs)


def register() -> None:
    from llama_cpp.llama_chat_format import LlamaChatCompletionHandlerRegistry

    LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
        BOUNDED_FORMAT, bounded_function_calling, overwrite=True
    )


def main() -> None:
    register()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
