"""Every table of the CLI: a header, a rule, one line per row; cells are never cut or wrapped
(ids stay whole however wide), and no colour or escape codes are written.

Drawn here when every cell is printable ASCII: the bytes rich draws for such a table (its
``SIMPLE_HEAD`` box without edges: columns three spaces apart, a rule of ``─`` as wide as the
table, lines stripped at the right), at a small fraction of rich's cost (about 0.7 ms a row)
and without importing it. Any other cell (wide or combining characters, a line break) is drawn
by rich itself, which measures what a terminal shows. tests/infra/cli/test_table.py holds the
two equal. Light on purpose: ``list`` imports it and not ``output``."""
from __future__ import annotations

import io
from typing import Sequence

from schedfence.infra.application.display import show

RULE = "\u2500"
GAP = "   "


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    cells = [[show(c) for c in row] for row in rows]
    if all(_plain(h) for h in headers) and all(_plain(c) for row in cells for c in row):
        return _drawn(list(headers), cells)
    return rich_drawn(list(headers), cells)


def rich_table(headers: Sequence[str], rows: Sequence[Sequence[object]],
               empty: str) -> list[str]:
    """``table``, or the line ``empty`` when there is no row."""
    return table(headers, rows) if rows else [empty]


def more_hint(next_cursor: str | None, shown: int, command: str) -> list[str]:
    """What text output says when a page is not the last: how to get the next one."""
    if next_cursor is None:
        return []
    return [f"({shown} shown; more match: next page: {command} --after {next_cursor})"]


def _plain(text: str) -> bool:
    return text.isascii() and text.isprintable()


def _drawn(headers: list[str], cells: list[list[str]]) -> list[str]:
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return GAP.join(v.ljust(w) for v, w in zip(values, widths)).rstrip()
    return [line(headers), RULE * (sum(widths) + len(GAP) * (len(widths) - 1))] + \
        [line(row) for row in cells]


def rich_drawn(headers: list[str], cells: list[list[str]]) -> list[str]:
    """The table as rich draws it (what ``_drawn`` reproduces for printable ASCII)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    grid = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="",
                 highlight=False)
    for header in headers:
        grid.add_column(header, no_wrap=True, overflow="ignore")
    for row in cells:
        grid.add_row(*row)
    buffer = io.StringIO()
    Console(file=buffer, width=1_000_000, color_system=None, force_terminal=False,
            highlight=False, markup=False, emoji=False).print(grid)
    return [line.rstrip() for line in buffer.getvalue().splitlines()]
