"""CLI commands: placeholder until its issue lands (registers nothing)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    return None
