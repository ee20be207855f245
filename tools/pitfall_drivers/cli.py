"""What the drivers' command lines share: the exit statuses, the one kind of error a user causes,
an argument parser whose errors name the flag, and the way a driver ends.

Exit statuses (every driver, `pitfall help` and the README say the same):
  0    what was asked for was done, and it came out as expected
  1    it was done, and something differs from what was expected (a cell, a node, a case)
  2    bad usage or bad input: a flag or a file, named in the message
  130  interrupted (Ctrl-C; SIGTERM where the driver says so)

An error is one line on stderr, `<prog>: error: <message> (see `<prog> --help`)`, where the
message names the flag (`--nodes 0: expected a number >= 1`) or the file and field.
"""
from __future__ import annotations

import argparse
import signal
import sys
from typing import Callable, NoReturn

EXIT_OK, EXIT_DIFFERS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class BadInput(Exception):
    """Bad usage or bad input: exit 2 with this message, which names the flag or the file."""


class Parser(argparse.ArgumentParser):
    """argparse, with its errors raised as BadInput naming the flag instead of a usage block
    printed and sys.exit(2) called from inside the parser."""

    def error(self, message: str) -> NoReturn:
        raise BadInput(f"`{self.prog}`: {message}")


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The parsed flags; an option the command does not know is BadInput naming it."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        raise BadInput(f"unknown option '{unknown[0]}' for `{parser.prog}`")
    return args


def error_line(prog: str, error: BadInput) -> str:
    return f"{prog}: error: {error} (see `{prog} --help`)"


def guarded(prog: str, command: Callable[..., int], *args) -> int:
    """command(*args)'s exit status, or 2 with BadInput's line on stderr: for a command called
    from another one as well as from its own script."""
    try:
        return command(*args)
    except BadInput as e:
        print(error_line(prog, e), file=sys.stderr)
        return EXIT_USAGE


def run_main(prog: str, main: Callable[[list[str]], int], interrupted: str,
             sigterm_interrupts: bool = False) -> NoReturn:
    """Runs main(sys.argv[1:]) as a script and exits with its status: BadInput is exit 2 with
    its line, Ctrl-C (and SIGTERM where asked) exit 130 with `interrupted` said."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if sigterm_interrupts:
        signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `pitfall matrix list | head` ends quietly
    try:
        code = guarded(prog, main, sys.argv[1:])
    except KeyboardInterrupt:
        print(f"{prog}: {interrupted}", file=sys.stderr)
        code = EXIT_INTERRUPTED
    sys.exit(code)


def _interrupt(signum, frame) -> NoReturn:
    raise KeyboardInterrupt()
