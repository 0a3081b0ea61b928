"""The `codesign` command line: `main` and one module per command group."""

from codesign.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
