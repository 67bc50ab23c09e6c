"""A scripted / callable fake provider for tests (no network), like inspect_ai's ``mockllm``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Union

from evolve.errors import EndpointError
from evolve.llm._providers import register_provider
from evolve.llm._types import ChatRequest, ChatResponse

FakeOutput = Union[str, ChatResponse, Exception]


class FakeProvider:
    """Answers requests from a script or a function, and records every request it receives.

    Args:
        outputs: Either an iterable of outputs consumed in order (a ``str`` becomes the message
            text, a :class:`ChatResponse` is returned as is, an ``Exception`` is raised), or a
            callable ``f(request) -> output`` with the same meaning.
        endpoint_id: Identity used in cache keys.
        prompt_tokens: Prompt tokens reported per call when the output is a plain string.
        completion_tokens: Completion tokens reported per call for plain strings.
        embeddings: Optional ``f(text) -> vector`` (or an ``Exception`` to raise) that makes
            :meth:`embed` serve embeddings; None (the default) means this fake endpoint serves
            no embeddings, like a llama-server started without ``--embeddings``.

    Attributes:
        requests: Every chat request received, in order.
        embedding_requests: The texts of every ``embed`` call received, in order.

    Raises:
        EndpointError: From ``complete`` when a script runs out (the test asked for more calls
            than it scripted).
    """

    def __init__(
        self,
        outputs: Iterable[FakeOutput] | Callable[[ChatRequest], FakeOutput],
        *,
        endpoint_id: str = "fake://",
        prompt_tokens: int = 100,
        completion_tokens: int = 20,
        embeddings: Callable[[str], Sequence[float] | Exception] | None = None,
    ) -> None:
        self.endpoint_id = endpoint_id
        self._fn = outputs if callable(outputs) else None
        self._script = None if callable(outputs) else list(outputs)
        self.requests: list[ChatRequest] = []
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.embeddings = embeddings
        self.embedding_requests: list[tuple[str, ...]] = []
        self._lock = threading.Lock()

    @property
    def calls(self) -> int:
        """Number of requests received (including ones that raised)."""
        return len(self.requests)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Return the next scripted output for ``request``. See :class:`FakeProvider`."""
        with self._lock:
            self.requests.append(request)
            if self._fn is not None:
                output = self._fn(request)
            else:
                if not self._script:
                    raise EndpointError(
                        f"fake provider ran out of scripted outputs after {len(self.requests) - 1} calls; "
                        "script more outputs or pass a callable."
                    )
                output = self._script.pop(0)
        if isinstance(output, Exception):
            raise output
        if isinstance(output, ChatResponse):
            return output
        return ChatResponse(
            text=output, prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens
        )


    async def embed(self, texts: Sequence[str], model: str) -> list[list[float]]:
        """One vector per text from ``embeddings``; see :class:`FakeProvider`.

        Raises:
            EndpointError: No ``embeddings`` function was given (this endpoint serves none).
        """
        with self._lock:
            self.embedding_requests.append(tuple(texts))
        if self.embeddings is None:
            raise EndpointError(f"{self.endpoint_id}: HTTP 501: this fake endpoint serves no embeddings")
        vectors = []
        for text in texts:
            vector = self.embeddings(text)
            if isinstance(vector, Exception):
                raise vector
            vectors.append([float(x) for x in vector])
        return vectors


register_provider("fake", lambda **kw: FakeProvider(**kw))
