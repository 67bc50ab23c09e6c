"""Fixtures for the embedded-model tests."""

from __future__ import annotations

import os

import pytest

from evolve.errors import LocalServerError
from evolve.local import DEFAULT_LOCAL_MODEL, InstallInfo, install, model_path, server_binary


@pytest.fixture(scope="session")
def installed_local_model() -> InstallInfo | None:
    """The default embedded model, installed.

    On CI (``CI=true``) this runs :func:`evolve.local.install` (idempotent: instant when
    ``evolve setup`` already ran). Elsewhere it never installs anything: the test is skipped
    with the reason when the server binary or the weights are missing.
    """
    if os.environ.get("CI") == "true":
        return install(model=DEFAULT_LOCAL_MODEL)
    try:
        server_binary()
    except LocalServerError as exc:
        pytest.skip(f"embedded llama-server not installed; run `evolve setup` ({exc})")
    weights = model_path(DEFAULT_LOCAL_MODEL)
    if not weights.is_file():
        pytest.skip(f"weights of {DEFAULT_LOCAL_MODEL} not installed at {weights}; run `evolve setup`")
    return None
