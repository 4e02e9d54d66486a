"""Tables at 80 columns (issue 59 item 6): `sweep` split numbers and headers across lines
('0.048'/'1', 'batc'/'h'), `frontier` split '0.070'/'8', `plan` truncated every cell. A table
chooses its columns to fit (the rest named in a line under it); no number or header word
ever breaks."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ridgeline.cli import app

PLAN = ["plan", "llama-3-8b", "--workload", "poisson:rate=5,prompt=256,output=32,n=50", "--devices", "a100-80gb"]
CASES = [
    (["sweep", "llama-2-7b", "-H", "h100-sxm", "--batch", "1,8", "--seq-len", "512,4096", "--generate", "128"], [4]),
    (["compare", "llama-2-7b", "-H", "a6000,h100-sxm,l4", "--w-bits", "16,4"], [6]),
    (["frontier", "llama-2-7b", "--tpot-slo", "0.02"], [7]),
    pytest.param([*PLAN, "--counts", "1", "--top", "2", "--workers", "1"], [1, 2], marks=pytest.mark.slow),
]


def tables(text: str, rows: list[int]) -> list[tuple[list[str], list[str]]]:
    """Each table's header lines (from its title to its rule) and its ``rows`` row lines."""
    lines, found, start = text.splitlines(), [], 0
    for n in rows:
        rule = next(i for i in range(start, len(lines)) if lines[i].strip() and set(lines[i].strip()) == {"─"})
        title = max(i for i in range(start, rule) if not lines[i].startswith(" ") or i == start)
        found.append((lines[title + 1 : rule], lines[rule + 1 : rule + 1 + n]))
        start = rule + 1 + n
    return found


def is_subsequence(short: list[str], long: list[str]) -> bool:
    it = iter(long)
    return all(word in it for word in short)


@pytest.mark.parametrize("args, rows", CASES, ids=["sweep", "compare", "frontier", "plan"])
def test_a_table_at_80_columns_fits_and_breaks_no_number_or_header_word(args, rows):
    narrow = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    wide = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
    assert narrow.exit_code == wide.exit_code == 0, narrow.output
    assert max(map(len, narrow.stdout.splitlines())) <= 80, narrow.stdout
    for (head, body), (wide_head, wide_body) in zip(tables(narrow.stdout, rows), tables(wide.stdout, rows)):
        words = " ".join(wide_head).split()
        assert set(" ".join(head).split()) <= set(words), (head, wide_head)
        for line, whole in zip(body, wide_body):  # each row whole on its line, its cells the wide row's
            assert is_subsequence(line.split(), whole.split()), (line, whole)
