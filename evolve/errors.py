"""One error tree for `evolve`, rooted at :class:`EvolveError`.

Every message says what went wrong *and how to fix it* (in the spirit of optuna's
``DuplicatedStudyError`` suggesting ``load_if_exists``). Catch :class:`EvolveError` to handle
anything the toolkit raises on purpose; anything else is a bug.
"""

from __future__ import annotations

__all__ = [
    "EvolveError",
    "ConfigError",
    "DataError",
    "PackError",
    "SplitError",
    "RubricError",
    "EndpointError",
    "TransientEndpointError",
    "BudgetError",
    "LocalServerError",
    "ServerDiedError",
    "RunError",
]


class EvolveError(Exception):
    """Root of every error `evolve` raises on purpose."""


class ConfigError(EvolveError):
    """A configuration value is missing, malformed or inconsistent."""


class DataError(EvolveError):
    """Input data cannot be read or does not match what the toolkit expects.

    Messages name the file, the row (1-based, as a spreadsheet shows it) and the field,
    then the fix.
    """


class PackError(DataError):
    """A rating pack is malformed or internally inconsistent."""


class SplitError(DataError):
    """A split manifest is malformed, overlapping or does not match its pack."""


class RubricError(DataError):
    """A rubric or judge prompt file under ``judge_prompts/`` is malformed."""


class EndpointError(EvolveError):
    """The model endpoint refused or failed a request in a way retries cannot fix."""


class TransientEndpointError(EndpointError):
    """A failure worth retrying: HTTP 429, 5xx, a timeout or a dropped connection."""


class BudgetError(EvolveError):
    """A budget setting makes the requested run impossible (e.g. fewer attempts than accepted)."""


class LocalServerError(EvolveError):
    """The embedded llama-server could not be installed, started or reached."""


class ServerDiedError(LocalServerError):
    """The embedded llama-server died during a run.

    The run stops at once (every remaining call would fail the same way) and can be resumed:
    finished calls are in the response cache. The message names the cause and the fix.
    """


class RunError(EvolveError):
    """A run directory is missing, incomplete or was made by a different configuration."""
