"""Test helpers users can reuse: a fake model provider and fixtures.

:class:`FakeProvider` is registered as the ``fake`` provider. It answers from a script or a
function and records every request, so tests can count calls (e.g. that a resumed run pays no
finished call twice) without any network.
"""

from evolve.testing._fake import FakeOutput, FakeProvider

__all__ = ["FakeOutput", "FakeProvider"]
