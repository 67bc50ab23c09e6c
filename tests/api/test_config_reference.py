"""The configuration-key reference: generated from the models, complete, and what the README holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from evolve.cli import app
from evolve.config import PRESETS, CalibrationConfig
from evolve.consilium import BenchConfig
from evolve.errors import ConfigError
from evolve.otb import OtbConfig
from evolve.workflows import config_keys, config_reference, replace_marked
from evolve.workflows._reference import README_MARKERS, attribute_docs

README = Path(__file__).resolve().parents[2] / "README.md"
CONFIGS = (CalibrationConfig, BenchConfig, OtbConfig)


def test_readme_section_is_the_generated_text() -> None:
    text = README.read_text(encoding="utf-8")
    start, end = README_MARKERS
    section = text.split(start, 1)[1].split(end, 1)[0]
    assert section.strip() == config_reference().strip(), "run `evolve config keys --update README.md`"


@pytest.mark.parametrize("model", CONFIGS, ids=lambda m: m.__name__)
def test_every_key_has_a_description(model: type[BaseModel]) -> None:
    keys = config_keys(model)
    missing = [f"{k.section}.{k.path.rsplit('.', 1)[-1]} ({k.path})" for k in keys if not k.description.strip()]
    assert not missing, f"add an Attributes: entry to the model's docstring for {missing}"


def test_nested_settings_become_dotted_keys_with_types_defaults_and_presets() -> None:
    keys = {k.path: k for k in config_keys(CalibrationConfig, presets=PRESETS)}
    for section in ("endpoint", "judge", "mutation", "budget", "racing", "selection", "archive"):
        nested = [p for p in keys if p.startswith(f"{section}.")]
        assert nested and all(p.count(".") == 1 for p in nested)
        settings = CalibrationConfig.model_fields[section].annotation
        assert isinstance(settings, type) and issubclass(settings, BaseModel)
        assert set(settings.model_fields) == {p.split(".", 1)[1] for p in nested}
    accepted = keys["budget.accepted"]
    assert (accepted.type, accepted.default, accepted.bounds) == ("int", "25", ">= 0, <= 10000")
    assert accepted.presets == {"paper": "25", "quick": "2"}
    assert keys["selection.rule"].type == '"robust" | "paper"' and keys["pack"].default == "required"
    assert keys["cache_path"].type == "path | null" and keys["archives_dir"].default == '"archives"'
    assert keys["criteria"].type == "list[str] | null"


def test_keys_under_a_mapping_of_models() -> None:
    paths = {k.path for k in config_keys(BenchConfig)}
    assert "generation.model_limits.<model>.opinion" in paths and "columns.text" in paths
    assert "model_decoding.<model>.max_tokens_board" in {k.path for k in config_keys(OtbConfig)}


def test_attribute_docs_reads_google_style_entries() -> None:
    class Example(BaseModel):
        """Summary.

        Attributes:
            alpha: First line
                continued here, see :func:`~evolve.config.resolve_config` and ``beta``.
            beta, gamma: Shared text.

        Raises:
            ValueError: Not an attribute.
        """

        alpha: int = 1
        beta: int = 2
        gamma: int = 3

    docs = attribute_docs(Example)
    assert docs == {"alpha": "First line continued here, see `evolve.config.resolve_config` and `beta`.",
                    "beta": "Shared text.", "gamma": "Shared text."}


def test_replace_marked_refuses_missing_markers() -> None:
    start, end = README_MARKERS
    assert replace_marked(f"a\n{start}\nold\n{end}\nb", "new") == f"a\n{start}\nnew\n{end}\nb"
    with pytest.raises(ConfigError, match="config-keys:start"):
        replace_marked("no markers here", "new")


def test_cli_prints_and_updates(tmp_path: Path) -> None:
    runner = CliRunner()
    printed = runner.invoke(app, ["config", "keys"])
    assert printed.exit_code == 0 and printed.output == config_reference()
    start, end = README_MARKERS
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Doc\n\n{start}\nstale\n{end}\n\nafter\n", "utf-8")
    updated = runner.invoke(app, ["config", "keys", "--update", str(doc)])
    assert updated.exit_code == 0, updated.output
    assert doc.read_text("utf-8") == f"# Doc\n\n{start}\n{config_reference().rstrip()}\n{end}\n\nafter\n"
    broken = tmp_path / "broken.md"
    broken.write_text("no markers\n", "utf-8")
    refused = runner.invoke(app, ["config", "keys", "--update", str(broken)])
    assert refused.exit_code == 2 and broken.read_text("utf-8") == "no markers\n"
