from pathlib import Path

import pytest

from app.namespaces import namespace_settings
from lore.errors import InvalidRequestError
from lore.settings import load_settings


def test_each_namespace_has_its_own_directory_and_neo4j_tag(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    default = namespace_settings(settings, "default")
    team = namespace_settings(settings, "team-a")
    assert default.data_dir == tmp_path and default.graph.neo4j_namespace == "lore"
    assert team.data_dir == tmp_path / "namespaces" / "team-a"
    assert team.graph.neo4j_namespace == "lore.team-a"
    assert settings.graph.neo4j_namespace == "lore"  # the original is untouched


@pytest.mark.parametrize("bad", ["", "Team", "../etc", "a/b", "-x", "x" * 64])
def test_unsafe_namespace_names_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(InvalidRequestError, match="invalid namespace"):
        namespace_settings(load_settings(data_dir=tmp_path), bad)
