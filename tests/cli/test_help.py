"""`delta-ops --help` and every subcommand's `--help` render (argparse %-formats help texts)."""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass

import pytest

from delta_ops import cli
from delta_ops.ops import registry
from delta_ops.ops.registry import OPERATIONS, Operation, Option


def _subcommands() -> list[str]:
    """Every subcommand the parser has, read from the parser itself."""
    parser = cli.build_parser()
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(subparsers) == 1
    return sorted(subparsers[0].choices)


def test_the_parser_has_a_subcommand_for_every_operation():
    assert set(_subcommands()) == {"inspect", "plan", *(o.command for o in OPERATIONS.values())}


def test_top_level_help_renders(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: delta-ops")
    for name in _subcommands():
        assert name in out


@pytest.mark.parametrize("name", _subcommands())
def test_every_subcommand_help_renders(capsys, name):
    assert cli.main([name, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: delta-ops {name} ")


@dataclass(frozen=True)
class _OddOptions:
    share: float = 0.05
    loud: bool = False
    mode: str = "a%"


def test_a_percent_sign_in_any_registry_text_renders(capsys, monkeypatch):
    """Help texts, option help, defaults and choices from the registry are shown literally."""
    base = OPERATIONS["purge"]
    odd = Operation(
        **{
            **{f: getattr(base, f) for f in base.__dataclass_fields__},
            "name": "odd",
            "help": "rewrite 100% of the files (%d, %(prog)s stays literal)",
            "options": (
                Option("share", "ratio", "at least 5% deleted", "5%"),
                Option("loud", "flag", "say 100%"),
                Option("mode", "choice", "one of them", "a%", ("a%", "b")),
            ),
            "options_type": _OddOptions,
        }
    )
    # the CLI's view of the registry, with one more operation (the registry itself is lazy and
    # lists the modules it imports from)
    cli_main = importlib.import_module("delta_ops.cli.commands")  # the module, not its main()
    monkeypatch.setattr(cli_main, "OPERATIONS", {**registry.OPERATIONS, "odd": odd})
    assert cli.main(["--help"]) == 0
    assert "rewrite 100% of the files (%d, %(prog)s stays literal)" in capsys.readouterr().out
    assert cli.main(["odd", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "rewrite 100% of the files (%d, %(prog)s stays literal)" in out
    assert "at least 5% deleted (e.g. 0.1 or 10%; default 5%)" in out
    assert "say 100%" in out and "(a% | b; default a%)" in out


@pytest.mark.parametrize("name", _subcommands())
def test_every_subcommand_help_says_what_it_does(capsys, name):
    """`delta-ops NAME --help` opens with what the command does (the top level's words for
    it), not with the bare list of arguments."""
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    said = {c.dest: c.help for c in subparsers._choices_actions}[name]
    assert said
    assert cli.main([name, "--help"]) == 0
    out = capsys.readouterr().out
    rest = out.partition("\n\n")[2]
    assert " ".join(rest.split()).startswith(" ".join(said.replace("%%", "%").split()))
