"""Test helpers users can reuse: a fake model provider and fixtures.

:class:`FakeProvider` is registered as the ``fake`` provider. It answers from a script or a
function and records every request, so tests can count calls (e.g. that a resumed run pays no
finished call twice) without any network. :class:`LoopbackChatServer` is a real OpenAI-compatible HTTP endpoint on
127.0.0.1 scripted by a function, for tests of the full HTTP stack and the command line; it also
serves a fake OpenAI Batch API whose states a :class:`BatchScript` sets.
"""

from evolve.llm import FakeOutput, FakeProvider
from evolve.testing._loopback import DROP, BatchScript, LoopbackChatServer, chat_completion

__all__ = ["DROP", "BatchScript", "FakeOutput", "FakeProvider", "LoopbackChatServer", "chat_completion"]
