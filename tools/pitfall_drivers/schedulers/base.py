"""The one interface `pitfall fleet`'s commands call, whichever scheduler runs the fleet."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import NoReturn

from ..cli import BadInput


class Scheduler:
    """A cluster scheduler as `pitfall fleet` uses it. Each command is a method; a scheduler
    implements those it can do and leaves the others to refuse, saying what does that there
    (`instead`). Every method returns the command's exit status (cli.EXIT_*) or raises BadInput."""

    name = ""
    # For a command this scheduler does not do: what the user should run instead.
    instead: dict[str, str] = {}

    def run(self, args: argparse.Namespace) -> int:
        """`fleet run`: submit the fleet, follow it, collect and merge (args: fleet.parser_for("run"))."""
        self.refuse("run")

    def status(self, out: Path, fleet: dict, as_json: bool) -> int:
        """`fleet status DIR`: each node's state now, changing nothing (fleet: DIR/fleet.json)."""
        self.refuse("status")

    def collect(self, out: Path, fleet: dict) -> int:
        """`fleet collect DIR`: every node's node.json, then the merged report."""
        self.refuse("collect")

    def cancel(self, out: Path, fleet: dict) -> int:
        """`fleet cancel DIR`: end what still runs, then collect."""
        self.refuse("cancel")

    def manifest(self, argv: list[str]) -> int:
        """`fleet manifest ...`: what to hand the scheduler instead of submitting (argv: its flags)."""
        self.refuse("manifest")

    def refuse(self, command: str) -> NoReturn:
        instead = self.instead.get(command, f"is not something pitfall does on {self.name}")
        raise BadInput(f"--engine {self.name}: `fleet {command}` {instead}")
