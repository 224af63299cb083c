"""The ``lore`` root group: global flags anywhere, errors as JSON under ``--json``.

Two things every command gets from here rather than from its own code:

* **Global flags after the subcommand.** ``lore status -q --data-dir D`` means
  ``lore -q --data-dir D status``: before parsing, the root's options found after the
  subcommand are moved in front of it — unless the subcommand has an option of that
  name itself (``lore keys create --namespace`` names the key's namespace). ``--json``
  goes the other way: given before the subcommand it is handed to the subcommand when
  that has its own ``--json`` (``lore --json status`` = ``lore status --json``).
* **Errors as JSON.** With ``--json`` anywhere on the line, a failure prints
  ``{"error": {"type", "message", "hint"}}`` on stderr instead of ``Error: …``, with
  the same exit status (2 for usage errors, 1 for the others, a command's own codes
  unchanged). ``type`` is the error class: a Lorekeeper error's (``NotFoundError``, as
  over HTTP), ``UsageError``/``BadParameter``/``NoSuchOption`` for the command line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

VALUED_GLOBALS = ("--data-dir", "--namespace", "--config")
FLAG_GLOBALS = ("-q", "--quiet", "--json")


class CliError(click.ClickException):
    """A command's failure (exit 1): a message, an optional hint, a machine-readable type."""

    def __init__(self, message: str, *, hint: str | None = None, kind: str = "CliError") -> None:
        super().__init__(message)
        self.hint = hint
        self.kind = kind

    def format_message(self) -> str:
        """The text form: the message, then the hint."""
        return f"{self.message} {self.hint}" if self.hint else self.message

    @classmethod
    def of(cls, exc: Exception, prefix: str = "") -> CliError:
        """A Lorekeeper (or any) error as a CLI error typed by its class name."""
        return cls(prefix + str(exc), kind=type(exc).__name__)


def error_body(exc: click.ClickException) -> dict[str, Any]:
    """``{"error": {"type", "message", "hint"}}`` for a failed command."""
    hint: str | None = None
    if isinstance(exc, CliError):
        kind, message, hint = exc.kind, exc.message, exc.hint
    else:
        kind, message = type(exc).__name__, exc.format_message()
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            hint = f"`{exc.ctx.command_path} --help` lists the arguments and options"
    if kind == "ClickException":
        kind = "CliError"
    return {"error": {"type": kind, "message": message, "hint": hint}}


def wants_json(args: Sequence[str]) -> bool:
    """Whether ``--json`` is among the options (not after ``--``)."""
    for token in args:
        if token == "--":
            return False
        if token == "--json":
            return True
    return False


def _takes_value(command: click.Command, name: str) -> bool:
    for param in command.params:
        if isinstance(param, click.Option) and name in param.opts:
            return not param.is_flag and not param.count
    return False


def _own_options(command: click.Command) -> set[str]:
    return {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}


def normalise(root: click.Group, args: Sequence[str]) -> list[str]:
    """``args`` with the root's options moved before the subcommand (see the module doc)."""
    args = list(args)
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        name = args[i].split("=", 1)[0]
        i += 2 if name in VALUED_GLOBALS and "=" not in args[i] else 1
    leading, names_start = args[:i], i
    command: click.Command = root
    while isinstance(command, click.Group) and i < len(args):
        sub = command.commands.get(args[i])
        if sub is None:
            break
        command, i = sub, i + 1
    names = args[names_start:i]
    if not names:
        return args
    hoisted, rest = _split(command, args[i:])
    front = leading + hoisted
    if "--json" in _own_options(command) and "--json" in front:
        front = [t for t in front if t != "--json"]
        rest.insert(0, "--json")
    return front + names + rest


def _split(command: click.Command, args: list[str]) -> tuple[list[str], list[str]]:
    """The root's options in ``args`` (a subcommand's arguments), and the rest."""
    own = _own_options(command)
    hoisted: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        name = token.split("=", 1)[0]
        if token == "--":
            rest.extend(args[i:])
            break
        if name in own:
            rest.append(token)
            if "=" not in token and _takes_value(command, name) and i + 1 < len(args):
                rest.append(args[i + 1])
                i += 1
        elif name in VALUED_GLOBALS:
            hoisted.append(token)
            if "=" not in token and i + 1 < len(args):
                hoisted.append(args[i + 1])
                i += 1
        elif name in FLAG_GLOBALS:
            hoisted.append(token)
        else:
            rest.append(token)
        i += 1
    return hoisted, rest


class LoreGroup(click.Group):
    """The root group: :func:`normalise` the arguments; JSON errors under ``--json``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse the arguments after moving global flags in front of the subcommand."""
        return super().parse_args(ctx, normalise(self, args))

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; under ``--json`` failures are printed as JSON."""
        argv = list(sys.argv[1:] if args is None else args)
        if not standalone_mode:
            return super().main(argv, prog_name, complete_var, False, **extra)
        as_json = wants_json(argv)
        try:
            code = super().main(argv, prog_name, complete_var, False, **extra)
        except click.ClickException as exc:
            if not as_json:
                exc.show()
            else:
                _json_error(error_body(exc))
            sys.exit(exc.exit_code)
        except click.Abort:
            if as_json:
                _json_error({"error": {"type": "Aborted", "message": "aborted", "hint": None}})
            else:
                click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def _json_error(body: dict[str, Any]) -> None:
    click.echo(json.dumps(body), err=True)


def fail(message: str, *, hint: str | None = None, kind: str = "CliError") -> NoReturn:
    """Stop the command with :class:`CliError` (exit 1)."""
    raise CliError(message, hint=hint, kind=kind)
