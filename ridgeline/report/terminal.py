"""Terminal output: numbers for tables (units in the headers, no exponents), compact rich
tables that fit the terminal, and a result printed or written (atomically) to a file."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from ridgeline.engine.units import GIB, KIB, MIB, format_si
from ridgeline.errors import InvalidOptionError
from ridgeline.io.files import write_atomic

TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
BYTE_UNITS = ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB"), (1.0, "B"))


def plain_number(value: float, digits: int = 3) -> str:
    """``digits`` significant digits, never an exponent for the sizes a table shows (digits
    3: 1690 -> '1690', 12.64 -> '12.6', 0.0505 -> '0.0505'; digits 4: 376.31 -> '376.3')."""
    if value is None or not math.isfinite(value):
        return "-"
    size = abs(value)
    if size >= 10 ** (digits - 1) or size == 0:
        return f"{value:.0f}"
    if size >= 1e-3:
        return f"{value:.{digits}g}"
    return f"{value:.2e}"


def si_number(value: float) -> str:
    """Decimal SI prefix, no unit (the header has it): 1.37e11 -> '137G', 1370 -> '1.37K'."""
    return format_si(value) if value else "0"


def column_unit(values, units) -> tuple[float, str]:
    """The unit (scale, name) that shows a column's largest value at 1 or more."""
    top = max((abs(v) for v in values if v is not None and math.isfinite(v)), default=0.0)
    return next(((scale, name) for scale, name in units if top >= scale), units[-1])


def compact_table(title: str):
    from rich import box
    from rich.table import Table

    # no vertical rules, two spaces between columns: wide tables fit 100 columns
    return Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0, 0, 1)
    )


def add_column(table, header: str, text: bool = False) -> None:
    table.add_column(header, justify="left" if text else "right", overflow="fold")


def longest_word(text: str) -> int:
    return max(map(len, text.split()), default=0)


def fit_columns(table, cells: list[list[str]], width: int) -> None:
    """Headers wrap at spaces, never truncated: when the table is wider than ``width``, fix
    each column at its longest header word or number, so headers and text break between
    words (rich would otherwise cut them short or break inside words)."""
    natural = [max(len(c.header), *map(len, col)) for c, col in zip(table.columns, cells)]
    if sum(natural) + 2 * len(natural) <= width:
        return
    for column, col in zip(table.columns, cells):
        cell = longest_word if column.justify == "left" else len  # text may wrap, numbers not
        column.width = max([longest_word(column.header), *map(cell, col)])


def column_need(header: str, cells: list[str], text: bool) -> int:
    """The narrowest a column may be: its longest header word and its longest number (text
    may wrap between words; a number never breaks)."""
    cell = longest_word if text else len
    return max([longest_word(header), *map(cell, cells)])


def choose_columns(
    columns: list[tuple[str, list[str], bool]], width: int, drop_first=()
) -> tuple[list[int], list[str]]:
    """Which of ``columns`` (header, cells, is text) a table ``width`` wide shows, each at least
    ``column_need`` wide, two spaces between: the headers ``drop_first`` names leave first,
    then the rightmost; the first column stays. Returns the kept indices and the headers left out."""
    need = [column_need(*c) + 2 for c in columns]  # compact_table: a space of padding, one of rule
    keep = list(range(len(columns)))
    order = [i for i, c in enumerate(columns) if c[0] in drop_first and i > 0]
    order.sort(key=lambda i: drop_first.index(columns[i][0]))
    order += [i for i in reversed(keep) if i > 0 and i not in order]
    for i in order:
        if sum(need[k] for k in keep) <= width:
            break
        keep.remove(i)
    return keep, [columns[i][0] for i in range(len(columns)) if i not in keep]


def left_out_line(headers: list[str]) -> list[str]:
    """The note under a table whose columns did not all fit the terminal."""
    if not headers:
        return []
    return [f"left out at {console_width()} columns: {', '.join(headers)} (a wider terminal, or the file, has them)"]


def to_terminal() -> bool:
    """Whether output goes to a terminal (or $COLUMNS says how wide one is)."""
    import os

    return sys.stdout.isatty() or "COLUMNS" in os.environ


def console_width() -> int:
    """A terminal's width or $COLUMNS; piped into a file, wide enough for every table."""
    from rich.console import Console

    return Console().width if to_terminal() else 160


def console() -> Console:
    return Console(highlight=False, soft_wrap=False, width=console_width())


def check_format(fmt: str, output: Path | None = None) -> None:
    """--format's value, and that a table (for a terminal) is not asked to go to a file."""
    if fmt not in ("table", "json", "csv"):
        raise InvalidOptionError(f"--format must be one of table, json, csv, got '{fmt}'")
    if fmt == "table" and output is not None:
        raise InvalidOptionError("--output needs --format json or csv")


def write_text(path: Path, text: str) -> None:
    """Write a result file atomically and say so on stderr."""
    write_atomic(path, text)
    print(f"wrote {path}", file=sys.stderr)


def print_lines(lines) -> None:
    for line in lines:
        print(line)


def show(items: list[Any], whole_lines: bool = True) -> None:
    """Print rich renderables; with ``whole_lines``, a line of text is never wrapped (grep and tail get it whole)."""
    out = console()
    for item in items:
        out.print(item, soft_wrap=whole_lines and isinstance(item, str))


def emit(text: str | None, renderables: list[Any], output: Path | None) -> None:
    """A result: ``text`` (JSON or CSV) to stdout or ``output``; else, the table view's renderables."""
    if text is None:
        if output is not None:
            raise InvalidOptionError("--output needs --format json or csv")
        show(renderables, whole_lines=not to_terminal())
    elif output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        write_text(output, text)
