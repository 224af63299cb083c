"""Settings from a config file next to the environment, and typos that are refused."""

from __future__ import annotations

import io
import re
import tomllib
from pathlib import Path

import pytest

from api.progress import ProgressReporter
from api.settings_docs import config_template
from lore.config_file import check_known_keys, setting_sources
from lore.errors import ConfigurationError
from lore.settings import Settings, load_settings


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_file_values_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write(tmp_path / "lore.toml", '[llm]\nmodel = "m-file"\n[search]\nrrf_k = 10\n')
    settings = load_settings(config)
    assert (settings.llm.model, settings.search.rrf_k) == ("m-file", 10)
    monkeypatch.setenv("LORE_SEARCH__RRF_K", "20")
    settings = load_settings(config, data_dir=tmp_path / "flag")
    assert (settings.llm.model, settings.search.rrf_k) == ("m-file", 20)
    assert settings.data_dir == tmp_path / "flag"


def test_yaml_file_and_lore_config_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write(tmp_path / "settings.yaml", "graph:\n  max_cluster_size: 7\n")
    monkeypatch.setenv("LORE_CONFIG", str(config))
    assert load_settings().graph.max_cluster_size == 7


def test_lore_toml_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "lore.toml", "[dense]\nef_search = 99\n")
    monkeypatch.chdir(tmp_path)
    assert load_settings().dense.ef_search == 99


def test_unknown_variable_names_the_closest_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LORE_LLM__BASEURL", "http://127.0.0.1:9/v1")
    with pytest.raises(ConfigurationError, match=r"LORE_LLM__BASEURL.*LORE_LLM__BASE_URL"):
        load_settings()


def test_unknown_file_key_names_the_closest_key(tmp_path: Path) -> None:
    config = write(tmp_path / "lore.toml", '[llm]\nbaseurl = "x"\n[serch]\nrrf_k = 1\n')
    with pytest.raises(ConfigurationError) as caught:
        load_settings(config)
    message = str(caught.value)
    assert "'llm.baseurl'" in message and "llm.base_url" in message
    assert "'serch.rrf_k'" in message


def test_a_named_file_must_exist_and_parse(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_settings(tmp_path / "missing.toml")
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        load_settings(write(tmp_path / "bad.toml", "[llm\n"))


def test_bad_value_in_the_file_is_a_validation_error(tmp_path: Path) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="rrf_k"):
        load_settings(write(tmp_path / "lore.toml", "[search]\nrrf_k = 0\n"))


def test_template_parses_and_changes_nothing(tmp_path: Path) -> None:
    text = config_template(Settings)
    config = write(tmp_path / "lore.toml", text)
    assert load_settings(config) == load_settings()
    setting_line = re.compile(r"^# [a-z0-9_]+ = (?!  \(unset)")
    uncommented = "\n".join(
        line[2:] if setting_line.match(line) else line for line in text.splitlines()
    )
    values = tomllib.loads(uncommented)
    check_known_keys(values, config, Settings, environ={})
    assert values["search"]["rrf_k"] == 60 and values["llm"]["model"] == "gpt-4o-mini"


def test_sources_say_where_each_value_came_from(tmp_path: Path) -> None:
    config = tmp_path / "lore.toml"
    sources = setting_sources(
        Settings,
        {"llm": {"model": "m"}},
        config,
        {"data_dir": tmp_path},
        environ={"LORE_SEARCH__RRF_K": "5"},
    )
    assert sources["data_dir"] == "flag"
    assert sources["search.rrf_k"] == "env LORE_SEARCH__RRF_K"
    assert sources["llm.model"] == f"file {config}"
    assert sources["llm.base_url"] == "default"


def test_progress_lines_off_a_terminal() -> None:
    from rich.console import Console

    now = [0.0]
    stream = io.StringIO()
    console = Console(file=io.StringIO(), force_terminal=False)
    with ProgressReporter(
        "ingest", quiet=False, console=console, interval_s=10, clock=lambda: now[0], stream=stream
    ) as bar:
        for done in range(1, 31):
            now[0] = done * 1.0
            bar.update(done, 30)
    lines = stream.getvalue().splitlines()
    # a line as soon as the work starts, then one every interval_s, then the end
    assert lines[0] == "ingest: 1/30 (3%), 1.0/s, ETA 29s"
    assert lines[1] == "ingest: 11/30 (37%), 1.0/s, ETA 19s"
    assert lines[2] == "ingest: 21/30 (70%), 1.0/s, ETA 9s"
    assert lines[-1] == "ingest: 30/30 (100%), 1.0/s, done in 30s"


def test_quiet_progress_prints_nothing() -> None:
    from rich.console import Console

    stream = io.StringIO()
    console = Console(file=io.StringIO(), force_terminal=False)
    with ProgressReporter("x", quiet=True, console=console, interval_s=0, stream=stream) as bar:
        bar.update(5, 10)
    assert stream.getvalue() == ""


def test_progress_lines_carry_the_llm_counters() -> None:
    from rich.console import Console

    from api.progress import llm_counters
    from lore.llm import LLMStats

    now = [0.0]
    stream = io.StringIO()
    console = Console(file=io.StringIO(), force_terminal=False)
    stats = LLMStats()
    assert llm_counters(stats, 1.0) == ""  # nothing before the first call
    with ProgressReporter(
        "extracting",
        quiet=False,
        console=console,
        interval_s=10,
        clock=lambda: now[0],
        stream=stream,
    ) as bar:
        for done in range(1, 5):
            now[0] = done * 10.0
            stats.calls, stats.prompt_tokens, stats.completion_tokens = done, 300 * done, 270 * done
            bar.update(done, 4, last=llm_counters(stats, now[0]))
    lines = stream.getvalue().splitlines()
    assert (
        lines[0] == "extracting: 1/4 (25%), 0.1/s, ETA 30s; LLM 1 calls, 570 tokens, 27.0 tokens/s"
    )
    assert lines[-1].startswith("extracting: 4/4 (100%), 0.1/s, done in 40s; LLM 4 calls")
