"""What every `python -m dpcore.*` command line shares when it parses its arguments.

Under mpiexec every rank parses the same arguments, so a typo used to print the usage and the
error once per rank. Parser prints them (and --help) on rank 0 alone, found from the launcher's
rank variable before MPI starts, while every rank exits with argparse's status. The number types
here refuse what `type=int` lets through and the program could not use (a batch of 0, -1
epochs) with argparse's own message.
"""
import argparse
import os

from ..setup.bootstrap import RANK_VARIABLES


def launcher_rank():
    """This process's rank in the launcher's job (mpiexec, srun), or None without one."""
    for variable in RANK_VARIABLES:
        if variable in os.environ:
            try:
                return int(os.environ[variable])
            except ValueError:
                return None
    return None


class HelpFormatter(argparse.RawDescriptionHelpFormatter,
                    argparse.ArgumentDefaultsHelpFormatter):
    """The description as written, and every option's default in --help (where it has one)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """argparse, printing on one rank only (its subcommands too), with --version."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from .. import __version__
        self.add_argument("--version", action="version",
                          version=f"%(prog)s (dpcore {__version__})")

    def _print_message(self, message, file=None):
        if launcher_rank() in (None, 0):
            super()._print_message(message, file)


def whole(low, high=None):
    """A type: a whole number of at least `low` (and at most `high`, if given)."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {low} or more, not {value}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"expected at most {high}, not {value}")
        return value
    parse.__name__ = f"whole number >= {low}"
    return parse


def positive(text):
    """A type: a number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, not {text}")
    return value


def argument(parse):
    """A type from a parser that raises ValueError: argparse shows that error's own words."""
    def typed(text):
        try:
            return parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    typed.__name__ = parse.__name__
    return typed
