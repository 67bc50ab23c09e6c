"""An endpoint given by its base URL means the OpenAI-compatible provider, in every resolver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evolve.config import EndpointSettings, resolve_config
from evolve.consilium import resolve_bench_config
from evolve.errors import ConfigError
from evolve.otb import resolve_otb_config

URL = "http://127.0.0.1:9/v1"

RESOLVERS = {
    "calibration": lambda **kw: resolve_config(overrides={"run_id": "r", "pack": "p", "splits": "s", **kw.pop("over", {})}, **kw),
    "bench": lambda **kw: resolve_bench_config(overrides={"run_id": "r", "cases": "c.jsonl", **kw.pop("over", {})}, **kw),
    "otb": lambda **kw: resolve_otb_config(overrides={"run_id": "r", "board": "t.jsonl", **kw.pop("over", {})}, **kw),
}


@pytest.mark.parametrize("kind", sorted(RESOLVERS))
def test_url_in_overrides_implies_openai_compatible(kind: str) -> None:
    config = RESOLVERS[kind](over={"endpoint": {"base_url": URL}}, environ={})
    assert config.endpoint.provider == "openai_compatible" and config.endpoint.base_url == URL


@pytest.mark.parametrize("kind", sorted(RESOLVERS))
def test_url_in_config_file_implies_openai_compatible(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"endpoint": {"base_url": URL, "model": "m"}}), "utf-8")
    config = RESOLVERS[kind](config_file=path, environ={})
    assert (config.endpoint.provider, config.endpoint.base_url, config.endpoint.model) == ("openai_compatible", URL, "m")


@pytest.mark.parametrize("kind", sorted(RESOLVERS))
def test_url_with_embedded_provider_fails_naming_both(kind: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RESOLVERS[kind](over={"endpoint": {"base_url": URL, "provider": "embedded"}}, environ={})
    assert "'embedded'" in str(caught.value) and URL in str(caught.value) and "endpoint" in str(caught.value)


def test_embedded_from_environment_with_url_from_file_fails(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"endpoint": {"base_url": URL}}), "utf-8")
    with pytest.raises(ConfigError, match="embedded"):
        RESOLVERS["calibration"](config_file=path, environ={"EVOLVE_PROVIDER": "embedded"})


def test_other_explicit_providers_keep_the_url() -> None:
    config = RESOLVERS["calibration"](over={"endpoint": {"base_url": URL, "provider": "fake"}}, environ={})
    assert config.endpoint.provider == "fake"


def test_no_url_keeps_the_embedded_default() -> None:
    assert RESOLVERS["calibration"](environ={}).endpoint.provider == "embedded"


def test_endpoint_settings_from_python() -> None:
    assert EndpointSettings(base_url=URL).provider == "openai_compatible"
    with pytest.raises(ValueError, match="embedded"):
        EndpointSettings(provider="embedded", base_url=URL)
    stored = EndpointSettings(base_url=URL).model_dump(mode="json")
    assert EndpointSettings.model_validate(stored) == EndpointSettings(base_url=URL)  # a stored run reads back
