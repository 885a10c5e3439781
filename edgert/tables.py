"""Plain-text tables that fit the terminal (80 columns included) and read the same when piped.

Public: the command line and the apps built on edgert (the XR demo's report) print with :func:`render`.

No dependency (the ``[cli]`` extra is only for live displays): a column of
figures keeps its full width, short headers keep it narrow, and when the
table is still too wide the text columns (model names, reasons) wrap onto
more lines instead of being cut. A column never shrinks below ``MIN_WIDTH``.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

#: The narrowest a wrapped column gets (characters).
MIN_WIDTH = 8
#: Between two columns.
GAP = "  "


@dataclass(frozen=True, slots=True)
class Column:
    """One column: header, ``align`` (``"<"`` text, ``">"`` figures), whether it may wrap."""

    header: str
    align: str = ">"
    wrap: bool = False


def width(stream: TextIO | None = None) -> int:
    """Columns to fit: ``$COLUMNS`` if set, else the terminal's, else 80 (a pipe)."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    stream = stream or sys.stdout
    if stream.isatty():
        return shutil.get_terminal_size((80, 24)).columns
    return 80


def _fit(cols: Sequence[Column], rows: Sequence[Sequence[str]], total: int) -> list[int]:
    """Column widths: natural widths, then the widest wrappable column shrunk until the table fits."""
    widths = [max([len(c.header)] + [len(r[i]) for r in rows]) for i, c in enumerate(cols)]
    need = sum(widths) + len(GAP) * (len(cols) - 1)
    while need > total:
        cands = [i for i, c in enumerate(cols) if c.wrap and widths[i] > MIN_WIDTH]
        if not cands:
            break   # figures only: wider than asked, never cut
        i = max(cands, key=lambda j: widths[j])
        cut = min(need - total, widths[i] - MIN_WIDTH)
        widths[i] -= cut
        need -= cut
    return widths


def _cell_lines(text: str, w: int, wrap: bool) -> list[str]:
    """``text`` in lines of at most ``w``, broken after spaces, ``_``, ``-`` or ``/`` where it can be."""
    if not wrap or len(text) <= w:
        return [text]
    lines: list[str] = []
    cur = ""
    for tok in re.split(r"(?<=[ _/-])", text):
        while len(tok) > w:                      # a token longer than the column: hard split
            if cur:
                lines.append(cur.rstrip())
                cur = ""
            lines.append(tok[:w])
            tok = tok[w:]
        if len(cur) + len(tok.rstrip()) > w:
            lines.append(cur.rstrip())
            cur = ""
        cur += tok
    if cur.strip():
        lines.append(cur.rstrip())
    return lines or [""]


def render(cols: Sequence[Column], rows: Sequence[Sequence[str]], title: str = "",
           total: int | None = None, footer: Sequence[str] = ()) -> str:
    """The table as text lines joined by newlines (no trailing newline).

    Args:
        cols: the columns.
        rows: cells as strings; a row equal to ``()`` draws a rule (e.g. before a total row).
        title: a line above the table, wrapped to the width.
        total: the width to fit (default :func:`width`).
        footer: lines under the table, each wrapped to the width.
    """
    total = total or width()
    body = [r for r in rows if r]
    widths = _fit(cols, body, total)
    rule = GAP.join("-" * w for w in widths)
    out = textwrap.wrap(title, total) if title else []
    out.append(GAP.join(f"{c.header:{c.align}{w}}" for c, w in zip(cols, widths)).rstrip())
    out.append(rule)
    for r in rows:
        if not r:
            out.append(rule)
            continue
        cells = [_cell_lines(v, w, c.wrap) for v, c, w in zip(r, cols, widths)]
        for k in range(max(len(x) for x in cells)):
            line = GAP.join(f"{(x[k] if k < len(x) else ''):{c.align}{w}}" for x, c, w in zip(cells, cols, widths))
            out.append(line.rstrip())
    for f in footer:
        out.extend(textwrap.wrap(f, total, subsequent_indent="  ") or [""])
    return "\n".join(out)
