"""The files derived from each committed kernel snapshot, which git does not track: the
self-contained HTML report and the CSV copy of its rows (``validate`` writes both beside a
new snapshot; they are regenerated, not committed).

    python -m kernels.validate.derived                 # every committed kernel snapshot
    python -m kernels.validate.derived SNAPSHOT.json   # these
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernels.validate.html import report_html
from kernels.validate.replay import snapshots
from kernels.validate.validate import to_csv
from ridgeline.io.catalog import VALIDATION_DIR
from ridgeline.io.files import write_atomic

FOLDERS = ("", "drift", "repeat-runs")  # where committed kernel snapshots live under reports/validation


def committed_snapshots() -> list[Path]:
    return [p for folder in FOLDERS for p in snapshots(VALIDATION_DIR / folder)]


def main(argv: list[str] | None = None) -> int:
    names = sys.argv[1:] if argv is None else argv
    for path in [Path(n) for n in names] or committed_snapshots():
        snap = json.loads(path.read_text())
        write_atomic(path.with_suffix(".csv"), to_csv(snap["rows"]))
        write_atomic(path.with_suffix(".html"), report_html(snap))
        print(f"wrote {path.with_suffix('.html')} and {path.with_suffix('.csv').name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
