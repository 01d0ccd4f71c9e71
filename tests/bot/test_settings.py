from __future__ import annotations

from pathlib import Path

import pytest

import bot.settings as settings_module
from bot.settings import load_settings
from core.errors import ConfigError
from tests.conftest import REPO


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("TACIT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


def test_defaults_need_no_file_and_no_environment(tmp_path: Path) -> None:
    settings = load_settings()
    assert settings.kb == "default"
    assert settings.llm.configured is False
    assert settings.index.chunk_size == 768


def test_toml_then_environment_which_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tacit.toml").write_text('kb = "ops"\n[llm]\nmodel = "from-file"\ntimeout = 5\n')
    monkeypatch.setenv("TACIT_LLM__MODEL", "from-env")
    settings = load_settings()
    assert settings.kb == "ops"
    assert settings.llm.model == "from-env"
    assert settings.llm.timeout == 5


def test_home_override_places_every_embedded_store(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path / "h")
    assert settings.graph_path == tmp_path / "h" / "graph.sqlite"
    assert settings.vector_uri == str(tmp_path / "h" / "milvus.db")
    assert settings.state_path.parent == tmp_path / "h"


def test_a_bad_value_names_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TACIT_LLM__TIMEOUT", "-3")
    with pytest.raises(ConfigError, match=r"llm\.timeout \(TACIT_LLM__TIMEOUT\)"):
        load_settings()


def test_an_unknown_key_in_the_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "tacit.toml").write_text("[llm]\nmodle = 'x'\n")
    with pytest.raises(ConfigError, match=r"llm\.modle.*unknown setting"):
        load_settings()


def test_a_malformed_file_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "tacit.toml").write_text("[llm\n")
    with pytest.raises(ConfigError, match=r"tacit\.toml"):
        load_settings()


def test_a_named_config_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_a_bad_kb_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TACIT_KB", "Bad Name!")
    with pytest.raises(ConfigError, match="kb"):
        load_settings()


def test_secrets_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TACIT_LLM__API_KEY", "sk-very-secret")
    monkeypatch.setenv("TACIT_STATE__URL", "redis://:hunter2@127.0.0.1:6379/0")
    shown = str(load_settings().masked())
    assert "sk-very-secret" not in shown
    assert "hunter2" not in shown


def test_the_example_config_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    # load_settings remembers the file for the process: the tests after this one must not
    # read the example's values as their settings.
    monkeypatch.setattr(settings_module, "_config_override", None)
    settings = load_settings(REPO / "deploy" / "tacit.example.toml")
    assert settings.llm.model


def test_every_setting_mapped_onto_a_core_option_has_its_default(tmp_path: Path) -> None:
    """Built from default settings the way the bot builds them (bot/wiring.py), every core
    option equals its dataclass default: a default written in bot/settings.py and in core
    cannot drift apart, whatever the setting is called on either side."""
    from dataclasses import fields, replace

    from bot.settings import Settings
    from bot.wiring import Services

    settings = Settings(home=tmp_path)
    services = Services(settings, graph=None, vectors=None, embedder=None, llm=None)  # type: ignore[arg-type]
    answer = services.answerer().options
    # Not defaults of a setting: the answerer shares the gate's coverage rule, and passes
    # llm.max_tokens per call where the option's None leaves it to the LLM (built with the same).
    assert answer.coverage is services.coverage_rule()
    assert answer.max_tokens == settings.llm.max_tokens
    built = [
        services.vector_cache().options,
        services.coverage_options(),
        services.retriever().options,
        services.gate(None).options,  # type: ignore[arg-type]
        services.indexer(extractor="nlp").options,
        replace(answer, coverage=None, max_tokens=None),
    ]
    for options in built:
        default = type(options)()
        differ = {
            f.name: (getattr(options, f.name), getattr(default, f.name))
            for f in fields(options)
            if getattr(options, f.name) != getattr(default, f.name)
        }
        assert not differ, f"{type(options).__name__} (setting, core default): {differ}"


@pytest.mark.parametrize(
    ("value", "waits"), [("every_language", True), ("across_languages", False)]
)
def test_screening_keywords_reach_the_gate_and_the_answerer_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, waits: bool
) -> None:
    """One setting, two sides: the gate's screening names keywords in the message's own
    language exactly when the answer waits for them (a gate naming none would make the answer
    wait for nothing; an answer not waiting would ignore what it names)."""
    from bot.wiring import Services

    monkeypatch.setenv("TACIT_GATE__SCREENING_KEYWORDS", value)
    settings = load_settings(home=tmp_path)
    services = Services(settings, graph=None, vectors=None, embedder=None, llm=None)  # type: ignore[arg-type]
    assert services.gate(None).options.screening_keywords == value  # type: ignore[arg-type]
    assert services.answerer().options.screened_keywords_own_language is waits


def test_the_gate_and_the_retriever_keep_one_cache_of_word_vectors(tmp_path: Path) -> None:
    """The coverage rule's cross-script look-ups and the retriever's row look-ups embed the
    same words with the same embedder: one process keeps them once (core/word_vectors.py)."""
    from bot.settings import Settings
    from bot.wiring import Services

    settings = Settings(home=tmp_path)
    services = Services(settings, graph=None, vectors=None, embedder=None, llm=None)  # type: ignore[arg-type]
    words = services.word_vectors()
    assert services.retriever().words is words
    assert services.answerer().retriever.words is words
    assert services.coverage_rule()._words is words
