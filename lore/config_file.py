"""The config file next to the environment, and the checks that catch typos in both.

A file is found by ``--config``, ``LORE_CONFIG`` or ``./lore.toml`` (in that order);
TOML (``.toml``) and YAML (``.yaml``/``.yml``) are read. The settings model is walked to
know every valid key, so an unknown one — ``llm.baseurl`` in the file or
``LORE_LLM__BASEURL`` in the environment — is refused with the closest valid name
instead of being ignored. :func:`setting_sources` tells, for ``lore config``, where each
effective value came from.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from lore.errors import ConfigurationError

ENV_PREFIX = "LORE_"
CONFIG_ENV = "LORE_CONFIG"  # names the config file; not a setting itself
DEFAULT_FILE = Path("lore.toml")


def find_config_file(explicit: Path | None = None) -> Path | None:
    """The config file to read: ``--config``, else ``LORE_CONFIG``, else ``./lore.toml``.

    A file that was named (flag or variable) must exist; ``./lore.toml`` is optional.
    """
    named = explicit if explicit is not None else _env_path()
    if named is not None:
        if not named.is_file():
            raise ConfigurationError(f"config file {named} does not exist (--config/LORE_CONFIG)")
        return named
    return DEFAULT_FILE if DEFAULT_FILE.is_file() else None


def _env_path() -> Path | None:
    value = os.environ.get(CONFIG_ENV, "").strip()
    return Path(value) if value else None


def read_config_file(path: Path) -> dict[str, Any]:
    """The file's settings as a nested mapping (a clear error when it cannot be parsed)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read config file {path}: {exc}") from exc
    if path.suffix.lower() in {".yaml", ".yml"}:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigurationError(f"config file {path} is not valid YAML: {exc}") from exc
        data = {} if data is None else data
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigurationError(f"config file {path} is not valid TOML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"config file {path} must hold a mapping of settings")
    return data


# -- the keys the model knows -------------------------------------------------------------


def setting_paths(
    model: type[BaseModel], prefix: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """Every leaf setting as a path of field names, in declaration order."""
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from setting_paths(annotation, (*prefix, name))
        else:
            yield (*prefix, name)


def section_names(model: type[BaseModel]) -> set[str]:
    """Top-level fields that are sections (nested models)."""
    return {
        name
        for name, field in model.model_fields.items()
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
    }


def env_name(path: tuple[str, ...]) -> str:
    """The environment variable of a setting: ``("llm", "base_url")`` → ``LORE_LLM__BASE_URL``."""
    return ENV_PREFIX + "__".join(path).upper()


def check_known_keys(
    data: Mapping[str, Any],
    path: Path | None,
    model: type[BaseModel],
    environ: Mapping[str, str] | None = None,
) -> None:
    """Refuse unknown keys in the file's ``data`` and unknown ``LORE_*`` variables."""
    leaves = list(setting_paths(model))
    known = {".".join(p) for p in leaves}
    sections = section_names(model)
    problems: list[str] = []
    for dotted in _flatten(data, sections):
        if dotted not in known and dotted not in sections:
            problems.append(
                f"unknown setting {dotted!r} in {path}{_hint(dotted, known | sections)}"
            )
    names = {env_name(p) for p in leaves} | {env_name((s,)) for s in sections} | {CONFIG_ENV}
    env = os.environ if environ is None else environ
    for variable in sorted(env):
        upper = variable.upper()
        if upper.startswith(ENV_PREFIX) and upper not in names:
            problems.append(f"unknown setting variable {variable}{_hint(upper, names)}")
    if problems:
        raise ConfigurationError("; ".join(problems))


def _hint(name: str, choices: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _flatten(data: Mapping[str, Any], sections: set[str]) -> Iterator[str]:
    """Dotted keys of a file's settings; a table (section) is walked one level down."""
    for key, value in data.items():
        if isinstance(value, Mapping):
            for inner in value:
                yield f"{key}.{inner}"
        else:
            yield str(key)


# -- where each effective value came from -------------------------------------------------


def setting_sources(
    model: type[BaseModel],
    file_data: Mapping[str, Any],
    path: Path | None,
    overrides: Mapping[str, object],
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``{"llm.base_url": "env LORE_LLM__BASE_URL", ...}`` for every leaf setting."""
    env = {k.upper(): v for k, v in (os.environ if environ is None else environ).items()}
    sections = section_names(model)
    in_file = set(_flatten(file_data, sections))
    sources: dict[str, str] = {}
    for leaf in setting_paths(model):
        dotted = ".".join(leaf)
        if leaf[0] in overrides and overrides[leaf[0]] is not None:
            sources[dotted] = "flag"
        elif env_name(leaf) in env:
            sources[dotted] = f"env {env_name(leaf)}"
        elif len(leaf) > 1 and env_name(leaf[:1]) in env:
            sources[dotted] = f"env {env_name(leaf[:1])}"
        elif dotted in in_file or (len(leaf) > 1 and leaf[0] in in_file):
            sources[dotted] = f"file {path}"
        else:
            sources[dotted] = "default"
    return sources
