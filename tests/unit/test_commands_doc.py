"""docs/commands.md names every subcommand and every flag ``pipelines/cli.py``'s parser has (issue 33: four
flags had drifted out of it): each subcommand's row spells its synopsis with each of its options and the
choices of its positional argument, and names no option the parser lacks."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from pipelines.cli import build_parser

COMMANDS_MD = Path(__file__).resolve().parents[2] / "docs" / "commands.md"
GLOBAL_OPTIONS = {"-h", "--help"}


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _synopses() -> dict[str, str]:
    """Each table row's first cell (the synopsis), by its subcommand."""
    rows = {}
    for line in COMMANDS_MD.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `lakecdc (\S+) (.*?)` \|", line) or re.match(r"\| `lakecdc (\S+)()` \|", line)
        if m:
            rows[m[1]] = m[2]
    return rows


def test_every_subcommand_has_a_row():
    assert set(_subcommands()) - set(_synopses()) == set()


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_a_row_names_every_option_of_its_subcommand_and_no_other(command):
    parser = _subcommands()[command]
    synopsis = _synopses().get(command, "")
    options = {s for a in parser._actions for s in a.option_strings if s.startswith("--")} - GLOBAL_OPTIONS
    written = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", synopsis))
    assert (options - written, written - options) == (set(), set()), synopsis
    for action in parser._actions:
        if not action.option_strings and action.choices:  # a positional action: up|down|status
            assert all(choice in synopsis for choice in action.choices), (action.dest, synopsis)
