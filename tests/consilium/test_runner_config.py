"""BenchConfig: presets, layering (preset < file < environment < overrides), validation."""

from __future__ import annotations

import json
import re

import pytest

from evolve.consilium import (
    BENCH_PRESETS,
    BenchConfig,
    model_slug,
    resolve_bench_config,
)
from evolve.errors import ConfigError


def _resolve(tmp_path, preset="quick", **overrides):
    return resolve_bench_config(preset=preset, overrides={"run_id": "r", "cases": tmp_path / "c.jsonl", **overrides},
                                environ={})


def test_quick_preset_fits_two_cores(tmp_path):
    c = _resolve(tmp_path)
    assert c.max_cases == 3 and c.generation.max_rounds == 2
    assert c.generation.limits.model_dump() == {"role_assignment": 600, "opinion": 600, "consilium": 500, "finalizer": 700}
    assert c.judge.max_tokens == 160 and c.judge_repeats == 1
    assert c.endpoint.provider == "embedded" and c.models == ("local",) and c.judge.model == "local"
    assert c.conditions == ("free-form", "structured") and c.topologies == ("single",)


def test_paper_preset_is_spec_5_6(tmp_path):
    c = _resolve(tmp_path, preset="paper")
    g = c.generation
    assert (g.temperature, g.top_p, g.seed, g.max_rounds) == (0.0, 1.0, 42, 5)
    assert g.limits.role_assignment == 4096 and g.limits.opinion == 16000 and g.limits.consilium == 16000
    assert c.max_cases is None and c.judge.max_tokens == 8000
    settings = c.pipeline_settings()  # what the pipeline receives
    assert settings.limits.role_assignment == 4096 and settings.max_rounds == 5 and settings.seed == 42


def test_layering_file_environment_overrides(tmp_path):
    file = tmp_path / "bench.json"
    file.write_text(json.dumps({"generation": {"max_rounds": 4, "limits": {"opinion": 1000}}, "judge_repeats": 3,
                                "models": ["from-file"]}))
    c = resolve_bench_config(
        preset="quick", config_file=file,
        overrides={"run_id": "r", "cases": tmp_path / "c.jsonl", "generation": {"max_rounds": 3}},
        environ={"EVOLVE_BASE_URL": "http://127.0.0.1:9/v1"})
    assert c.generation.max_rounds == 3 and c.generation.limits.opinion == 1000
    assert c.generation.limits.finalizer == 700  # untouched preset value
    assert c.judge_repeats == 3 and c.models == ("from-file",)
    assert c.endpoint.provider == "openai_compatible" and c.endpoint.base_url == "http://127.0.0.1:9/v1"
    assert c.endpoint.model == "from-file" and c.judge.model == "from-file"  # the first model by default


def test_judge_and_endpoint_models(tmp_path):
    c = _resolve(tmp_path, models=("a/x", "b"), judge={"model": "judge-m"})
    assert c.endpoint.model == "a/x" and c.judge.model == "judge-m"
    c = _resolve(tmp_path, endpoint={"model": "ep"})
    assert c.models == ("ep",) and c.judge.model == "ep"


@pytest.mark.parametrize("overrides, message", [
    ({"topologies": ("n+1",)}, "needs worker models"),
    ({"workers": ("w",)}, "only used by topology 'n+1'"),
    ({"models": ("org/m", "org-m")}, "share the file-name slug"),
    ({"conditions": ("structured", "structured")}, "more than once"),
    ({"conditions": ("narrative",)}, "conditions"),
    ({"generation": {"max_rounds": 6}}, "max_rounds"),
    ({"run_id": "a b"}, "run_id"),
])
def test_invalid_configs_name_the_field(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        _resolve(tmp_path, **overrides)


def test_unknown_preset_and_unreadable_file(tmp_path):
    with pytest.raises(ConfigError, match="unknown preset"):
        _resolve(tmp_path, preset="huge")
    with pytest.raises(ConfigError, match="cannot read config JSON"):
        resolve_bench_config(config_file=tmp_path / "missing.json", overrides={"run_id": "r", "cases": tmp_path})


def test_model_slug():
    assert model_slug("openai/gpt-oss-120b") == "openai-gpt-oss-120b"
    assert model_slug("qwen2.5:0.5b") == "qwen2.5-0.5b"
    with pytest.raises(ConfigError):
        model_slug("//")


def test_config_roundtrips_through_json(tmp_path):
    c = _resolve(tmp_path, topologies=("single", "n+1"), workers=("w1", "w2"), consolidator="m")
    assert BenchConfig.model_validate_json(c.model_dump_json()) == c
    assert set(BENCH_PRESETS) == {"quick", "paper"}


def test_a_version_1_bench_run_keeps_the_prompt_layout_it_was_judged_with(tmp_path):
    """Runs written before the judge settings named their layout were judged target first."""
    stored = json.loads(_resolve(tmp_path).model_dump_json())
    assert stored["version"] == 2 and stored["judge"]["layout"] == "criterion-first"
    old = {**stored, "version": 1, "judge": {k: v for k, v in stored["judge"].items() if k != "layout"}}
    assert BenchConfig.model_validate(old).judge.layout == "target-first"
