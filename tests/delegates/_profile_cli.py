"""``edgert profile`` called in process, as the CLI parses it (shared by the profile tests)."""

from __future__ import annotations

import argparse

from edgert.cli import _profile as cmd_profile


def profile_cli(*argv: str) -> int:
    """Run ``edgert profile ARGV...``; its exit status."""
    ap = argparse.ArgumentParser()
    cmd_profile.register(ap.add_subparsers())
    args = ap.parse_args(["profile", *argv])
    return args.func(args)
