"""Keeping a provider's own secrets out of every text it hands back.

An endpoint may echo what it was sent: a 400 error quoting the ``Authorization`` header, a
proxy answering with the request it received. Whatever a provider returns - error messages,
reply text, reasoning - ends up in ``scores.csv``, reports, the journal, the response cache or
the terminal, so the provider replaces its own secrets in those texts by :data:`REDACTED`
before anyone sees them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

REDACTED = "[redacted]"
"""What stands where a secret was."""

MIN_SECRET_CHARS = 12
"""Values shorter than this are not treated as secrets. Local servers accept any key, and the
placeholders people give them (``x``, ``EMPTY``, ``ollama``, ``lm-studio``, ``not-needed``)
are ordinary words that would be blanked wherever a model happened to write them, changing
answers. Hosted providers' keys are 32 characters or more, the embedded server's random key 32."""

_AUTH_SCHEMES = ("bearer", "basic", "token", "apikey", "api-key", "key")
_SECRET_NAME_WORDS = frozenset({
    "key", "apikey", "token", "secret", "password", "passwd", "pass", "pwd", "sig", "signature", "auth",
    "authorization", "credential", "credentials", "code",
})


class Scrubber:
    """Replaces a fixed set of secrets in texts by :data:`REDACTED`.

    Each secret is also matched in the forms an echo may take: percent-encoded (a URL), and
    escaped inside a JSON or Python string literal. Longer forms are replaced first, so a
    secret that contains another is blanked whole.

    Args:
        secrets: The values to hide; ``None``, empty and short values (under
            :data:`MIN_SECRET_CHARS` characters once stripped) are ignored.

    Example:
        >>> Scrubber(["sk-0123456789abcdef"])("header: Bearer sk-0123456789abcdef")
        'header: Bearer [redacted]'
    """

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        forms = {form for secret in secrets for form in _forms(secret)}
        self.count = len(forms)
        ordered = sorted(forms, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def __call__(self, text: str) -> str:
        """``text`` with every secret replaced by :data:`REDACTED` (unchanged when it holds none)."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(REDACTED, text)

    def __bool__(self) -> bool:
        return self._pattern is not None

    @classmethod
    def for_endpoint(
        cls, *, api_key: str | None = None, headers: Mapping[str, str] | None = None, base_url: str | None = None
    ) -> Scrubber:
        """The secrets a client sends to one endpoint.

        Args:
            api_key: The key sent as ``Authorization: Bearer <key>``.
            headers: Extra headers sent with every request (``api-key``, a proxy's token ...):
                every value is a secret, with and without an auth scheme word in front
                (``Bearer``, ``Basic`` ...).
            base_url: The endpoint URL: a password in it (``https://user:pw@host``) and the
                values of query parameters named like a credential (``?api-key=``, ``token``,
                ``sig`` ...) are secrets; other parameters (``api-version``) are not.

        Returns:
            A scrubber for those values.
        """
        values: list[str | None] = [api_key]
        for value in (headers or {}).values():
            values += [value, _without_scheme(value)]
        values += list(url_credentials(base_url).values())
        return cls(values)


def _forms(secret: str | None) -> set[str]:
    """The spellings of ``secret`` an echo may use (empty when it is too short to be one)."""
    if secret is None or len(secret.strip()) < MIN_SECRET_CHARS:
        return set()
    secret = secret.strip()
    return {secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1], repr(secret)[1:-1]}


def _without_scheme(value: str) -> str | None:
    """``"Bearer abc"`` -> ``"abc"``; None when the value has no auth scheme word in front."""
    scheme, _, rest = value.strip().partition(" ")
    return rest.strip() if rest and scheme.lower() in _AUTH_SCHEMES else None


def url_credentials(url: str | None) -> dict[str, str]:
    """The credentials written into a URL, by where they stand.

    A password (``https://user:pw@host``) and the values of query parameters whose name has a
    credential word in it (``api-key``, ``apiKey``, ``access_token``, ``sig``, ``auth`` ...;
    words split at ``-``, ``_`` and ``.``) count; other parameters (``api-version``) do not.

    Args:
        url: Any URL, or None.

    Returns:
        ``{"password": value, "query parameter 'api-key'": value, ...}``; empty for None, a
        malformed URL or a URL without credentials.
    """
    if not url:
        return {}
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # a malformed URL: the client refuses it anyway
        return {}
    found = {"password": password} if password else {}
    for name, value in parse_qsl(parts.query, keep_blank_values=False):
        if _SECRET_NAME_WORDS & set(re.split(r"[-_.]", name.lower())):
            found[f"query parameter {name!r}"] = value
    return found
