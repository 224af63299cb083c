"""Every ``lore`` command takes ``--json``, and with it errors are JSON on stderr.

Walks click's command tree, so a command added later is checked too. Runs the real
command line in this process (click's runner); nothing is mocked.
"""

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from api.cli import main
from api.cli_group import normalise


def leaves(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every runnable command's path, e.g. ``("graph", "build")``."""
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from leaves(command, (*path, name))
        else:
            yield (*path, name)


COMMANDS = list(leaves(main))


def run(tmp_path: Path, *args: str) -> click.testing.Result:
    env = {"LORE_DATA_DIR": str(tmp_path / "nothing-here")}
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def error_of(result: click.testing.Result) -> dict[str, object]:
    body = json.loads(result.stderr)
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message", "hint"}
    error: dict[str, object] = body["error"]
    return error


def test_the_tree_is_walked() -> None:
    assert {("search",), ("graph", "build"), ("keys", "revoke"), ("serve",)} <= set(COMMANDS)
    assert len(COMMANDS) >= 20


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_command_takes_json(tmp_path: Path, path: tuple[str, ...]) -> None:
    assert run(tmp_path, *path, "--json", "--help").exit_code == 0


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_usage_errors_are_json_with_the_same_exit_code(
    tmp_path: Path, path: tuple[str, ...]
) -> None:
    plain = run(tmp_path, *path, "--no-such-option")
    as_json = run(tmp_path, *path, "--no-such-option", "--json")
    assert plain.exit_code == as_json.exit_code == 2
    assert "Error" in plain.stderr and not plain.stderr.startswith("{")
    error = error_of(as_json)
    assert error["type"] == "NoSuchOption"
    assert "--no-such-option" in str(error["message"])
    assert "--help" in str(error["hint"])
    assert as_json.stdout == ""


READS = [
    ("status",),
    ("search", "HTTP 504"),
    ("show", "doc.md"),
    ("delete", "doc.md"),
    ("reindex",),
    ("jobs",),
    ("ask", "what is ERR_42?"),
    ("graph", "build"),
    ("graph", "show", "ledger-db"),
    ("graph", "communities"),
    ("graph", "reports"),
    ("graph", "quarantined"),
    ("graph", "export"),
    ("graph", "refresh"),
]


@pytest.mark.parametrize("path", READS, ids=" ".join)
def test_no_data_is_a_json_error_with_a_hint(tmp_path: Path, path: tuple[str, ...]) -> None:
    plain = run(tmp_path, *path)
    as_json = run(tmp_path, *path, "--json")
    assert plain.exit_code == as_json.exit_code == 1
    error = error_of(as_json)
    assert error["type"] == "NoDataError"
    assert "no Lorekeeper data here" in str(error["message"])
    assert "lore ingest" in str(error["hint"])
    assert not (tmp_path / "nothing-here").exists()  # a read creates nothing


def test_global_flags_after_the_subcommand(tmp_path: Path) -> None:
    root = main
    assert normalise(root, ["status", "-q", "--data-dir", "D"]) == [
        "-q",
        "--data-dir",
        "D",
        "status",
    ]
    assert normalise(root, ["graph", "build", "--data-dir=D", "--json"]) == [
        "--data-dir=D",
        "graph",
        "build",
        "--json",
    ]
    # a subcommand's own option of the same name stays its own
    assert normalise(root, ["keys", "create", "--namespace", "a"]) == [
        "keys",
        "create",
        "--namespace",
        "a",
    ]
    # --json before the subcommand is handed to it; serve has none of its own
    assert normalise(root, ["--json", "status"]) == ["status", "--json"]
    assert normalise(root, ["serve", "--json"]) == ["--json", "serve"]
    # a value that looks like a flag stays the value of its option
    assert normalise(root, ["search", "--filter", "-q", "x"]) == ["search", "--filter", "-q", "x"]
    assert normalise(root, ["search", "--", "-q"]) == ["search", "--", "-q"]

    data = tmp_path / "elsewhere"
    made = CliRunner().invoke(
        main, ["keys", "create", "--admin", "--json", "--data-dir", str(data)]
    )
    assert made.exit_code == 0, made.output
    assert data.is_dir()


def test_keys_and_init_speak_json_with_iso_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = str(tmp_path / "data")
    created = CliRunner().invoke(main, ["--data-dir", data, "keys", "create", "--admin", "--json"])
    assert created.exit_code == 0, created.output
    key = json.loads(created.stdout)
    stamp = datetime.fromisoformat(key["created"])
    assert stamp.utcoffset() is not None and key["created"].endswith("Z")
    assert key["revoked"] is None
    revoked = CliRunner().invoke(main, ["keys", "revoke", key["id"], "--json", "--data-dir", data])
    assert revoked.exit_code == 0, revoked.output
    assert json.loads(revoked.stdout) == {"revoked": key["id"]}
    listed = json.loads(
        CliRunner().invoke(main, ["--data-dir", data, "keys", "list", "--json"]).stdout
    )
    assert datetime.fromisoformat(listed[0]["revoked"]) >= stamp

    wrote = CliRunner().invoke(main, ["init", "--json"])
    assert wrote.exit_code == 0 and json.loads(wrote.stdout) == {"written": "lore.toml"}
    again = CliRunner().invoke(main, ["init", "--json"])
    assert again.exit_code == 1
    assert error_of(again) == {
        "type": "FileExistsError",
        "message": "lore.toml exists",
        "hint": "Use --force to overwrite it.",
    }
