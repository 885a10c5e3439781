"""``edgert devices --check MODEL…``: which paths the load-time accuracy check keeps for each model, and why."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def check_models(models: list[str], delegates: str, tolerance: float | None) -> list[dict[str, Any]]:
    """Load each model as ``rt.load`` does (default check, or ``tolerance``) on the given paths; one row
    per model and path: ``model``, ``path``, ``precision``, ``verdict`` (``kept``, ``excluded``,
    ``refused``: no path took the model, ``not checked``: an fp32 path under the default check, or a
    path that could not open it), ``error`` (share of the range, when compared) and ``reason``."""
    import edgert  # noqa: PLC0415
    from delegates.registry import resolve  # noqa: PLC0415

    spec = delegates if delegates in ("auto", "cpu", "gpu", "npu", "dsp") else \
        [n.strip() for n in delegates.split(",") if n.strip()]
    paths = resolve(spec)
    rows: list[dict[str, Any]] = []
    with edgert.Runtime(delegates=[d.name for d in paths], cpu_workers=1, warmup_runs=1) as rt:
        for m in models:
            name = Path(m).stem
            fmt = Path(m).suffix.lstrip(".")
            try:
                rt.load(m, name=name, tolerance=tolerance)
            except edgert.EdgeRTError as exc:
                rows += [{"model": name, "path": d.name, "precision": d.precision, "verdict": "refused",
                          "error": None, "reason": str(exc)} for d in paths if fmt in d.formats]
                continue
            st = rt.stats()[name]
            errors = (st.get("accuracy") or {}).get("errors", {})
            excluded = st.get("excluded", {})
            for d in paths:
                if fmt not in d.formats:
                    continue
                verdict = "excluded" if d.name in excluded else "kept" if d.name in errors else "not checked"
                rows.append({"model": name, "path": d.name, "precision": d.precision, "verdict": verdict,
                             "error": errors.get(d.name), "reason": excluded.get(d.name, "")})
    return rows


def run(args: argparse.Namespace) -> int:
    """Print the rows of :func:`check_models` as a table, or JSON with ``--json``."""
    from edgert.tables import Column, render, width  # noqa: PLC0415

    rows = check_models(args.check, args.delegates, args.tolerance)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from edgert._core._accuracy import DEFAULT_TOLERANCE  # noqa: PLC0415

    tol = args.tolerance if args.tolerance is not None else DEFAULT_TOLERANCE
    table = [(r["model"], r["path"], r["precision"], r["verdict"],
              "-" if r["error"] is None else f"{r['error']:.2g}") for r in rows]
    foot = [f"{r['model']} on {r['path']}: {r['reason']}" for r in rows if r["reason"]]
    foot += [f"error = largest |path - fp32 CPU| as a share of each output's range, on the check's sample; "
            f"tolerance {tol:g}" + ("" if args.tolerance is not None else
                                    " (the default check: paths below fp32 only; --tolerance checks every path)")]
    print(render([Column("model", "<"), Column("path", "<"), Column("prec", "<"), Column("verdict", "<"),
                  Column("error", ">")], table,
                 title="edgert accuracy check", total=width(), footer=foot))
    return 0
