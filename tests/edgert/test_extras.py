"""edgert.extras: a missing extra is named; one with no release for this Python says so instead."""

from __future__ import annotations

import importlib
import sys

import pytest

from edgert import extras


def _no_such_module(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(name: str, package: str | None = None) -> object:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    monkeypatch.setattr(importlib, "import_module", refuse)


def test_a_missing_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_such_module(monkeypatch)
    monkeypatch.setattr(sys, "version_info", (3, 12, 1, "final", 0))
    with pytest.raises(extras.MissingExtra, match=r"^serve needs mlserver: pip install 'edgert\[kserve-server\]'$"):
        extras.require("mlserver", "serve")


def test_mlserver_on_python_3_13_says_it_has_no_release_there(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_such_module(monkeypatch)
    monkeypatch.setattr(sys, "version_info", (3, 13, 0, "final", 0))
    with pytest.raises(extras.MissingExtra, match=r"needs Python < 3.13 \(this is 3.13\); run it on Python 3.11 or 3.12"):
        extras.require("mlserver", "edgert cloud serve --kserve")
    assert extras.unavailable_here("rich") is None
