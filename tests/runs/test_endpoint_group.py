"""EndpointSettings for several replicas: the URL list, its checks, the group's cache identity."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from evolve.llm import RoutingProvider
from evolve.runs import EndpointSettings, open_client

A, B, C = "http://a:8000/v1", "http://b:8000/v1", "http://c:8000/v1"


def test_a_list_of_urls_becomes_base_urls_with_base_url_its_first() -> None:
    ep = EndpointSettings(base_url=[A, B], model="m")
    assert (ep.provider, ep.base_url, ep.base_urls, ep.urls) == ("openai_compatible", A, (A, B), (A, B))
    assert EndpointSettings(base_urls=[A, B]).base_url == A
    one = EndpointSettings(base_url=[A])
    assert (one.base_url, one.base_urls, one.is_group) == (A, (), False)


def test_a_stored_single_url_config_reads_as_before() -> None:
    ep = EndpointSettings.model_validate({"provider": "openai_compatible", "base_url": A, "model": "m"})
    assert ep.base_urls == () and ep.cache_identity() is None and ep.urls == (A,)
    assert "base_url" in ep.resume_fields()


@pytest.mark.parametrize(("data", "words"), [
    ({"base_urls": [A, A]}, "twice"),
    ({"base_url": B, "base_urls": [A, C]}, "not the first"),
    ({"base_urls": [A, "http://u:secretpassword@b:8000/v1"]}, "credential"),
    ({"provider": "fake", "base_urls": [A, B]}, "openai_compatible"),
    ({"base_url": "notaurl"}, "'notaurl' is not an http:// or https:// URL"),
    ({"base_url": "localhost:8000/v1"}, "is not an http:// or https:// URL; give the server's "),
    ({"base_urls": [A, "ftp://b/v1"]}, "'ftp://b/v1' is not an http"),
    ({"base_url": "http://"}, "'http://' is not an http"),
])
def test_bad_url_lists_are_refused_naming_the_problem(data: dict, words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        EndpointSettings.model_validate(data)


def test_the_group_identity_ignores_order_and_members() -> None:
    ids = {EndpointSettings(base_url=urls, model="m").cache_identity() for urls in ([A, B], [B, A], [A, B, C])}
    assert ids == {"group:m"}
    assert EndpointSettings(base_url=[A, B], model="m", group="lab").cache_identity() == "group:lab"
    assert EndpointSettings(base_url=A, model="m", group="lab").cache_identity() == "group:lab"  # grows without a new cache


def test_a_resume_may_change_the_replicas_of_a_group_but_not_leave_it() -> None:
    two = EndpointSettings(base_url=[A, B], model="m").resume_fields()
    assert two == EndpointSettings(base_url=[C, B, A], model="m").resume_fields()
    assert "base_url" not in two and "base_urls" not in two
    assert two != EndpointSettings(base_url=A, model="m").resume_fields()
    assert two != EndpointSettings(base_url=[A, B], model="other").resume_fields()


def test_open_client_builds_one_routing_provider_over_the_urls(tmp_path) -> None:
    client, closer = open_client(EndpointSettings(base_url=[A, B], model="m"), cache_path=tmp_path / "c.sqlite")
    try:
        assert isinstance(client.provider, RoutingProvider)
        assert client.endpoint_id == "group:m" and client.provider.names == [A, B]
        assert closer is None
    finally:
        client.close()


def test_batch_with_a_replica_group_warns_and_stays_interactive(tmp_path) -> None:
    from evolve.runs import Journal, owned_client

    journal = Journal(tmp_path / "journal.jsonl")
    endpoint = EndpointSettings(base_url=[A, B], model="m", batch=True)
    with owned_client(endpoint, cache_path=tmp_path / "c.sqlite", journal=journal) as client:
        assert client.batch is None
    warnings = [e["message"] for e in journal.events() if e.get("event") == "warning"]
    assert any("not a group of replicas" in w for w in warnings)


def test_cli_base_urls_replace_a_config_files_list(tmp_path) -> None:
    """A repeated or comma-separated --base-url gives base_urls; a single one replaces a config
    file's list (the layers merge section by section, so the list must be overwritten, not kept)."""
    import json

    from evolve.cli._app import _endpoint_overrides, base_url_list
    from evolve.config import PRESETS
    from evolve.layering import layered

    assert base_url_list([f"{A},{B}", f" {C} "]) == [A, B, C] and base_url_list(None) == []
    assert _endpoint_overrides(base_url=[A, B])["base_urls"] == (A, B)
    assert "base_urls" not in _endpoint_overrides(model="m")  # no URL given: the config's stand
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"endpoint": {"base_urls": [A, B], "model": "m"}}))
    merged = layered(PRESETS, preset=None, config_file=config, overrides={"endpoint": _endpoint_overrides(base_url=[C])},
                     environ={})
    ep = EndpointSettings.model_validate(merged["endpoint"])
    assert (ep.base_url, ep.base_urls, ep.is_group) == (C, (), False)
