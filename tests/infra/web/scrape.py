"""What a page shows, read with the standard library's HTML parser: the timeline's rows (as
their data attributes), every link (href and text), and the text without markup."""
from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

# Tags that separate words as a browser lays them out; inline ones (a, span, b) do not.
_BREAKS = {"td", "th", "tr", "li", "div", "p", "br", "dt", "dd", "h1", "h2", "table",
           "summary", "details", "option", "label", "title", "header", "main", "nav"}


@dataclass
class Page:
    rows: list[dict[str, str]] = field(default_factory=list)  # timeline rows, in page order
    links: list[tuple[str, str]] = field(default_factory=list)  # (href, text)
    text: str = ""


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self._href: str | None = None
        self._link_text: list[str] = []
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag in _BREAKS:
            self._text.append(" ")
        if tag == "tr" and "data-position" in a:
            self.page.rows.append({k[5:]: v for k, v in a.items() if k.startswith("data-")})
        if tag == "a":
            self._href, self._link_text = a.get("href", ""), []

    def handle_endtag(self, tag: str) -> None:
        if tag in _BREAKS:
            self._text.append(" ")
        if tag == "a" and self._href is not None:
            self.page.links.append((self._href, "".join(self._link_text)))
            self._href = None

    def handle_data(self, data: str) -> None:
        self._text.append(data)
        if self._href is not None:
            self._link_text.append(data)

    def close(self) -> None:
        super().close()
        self.page.text = " ".join("".join(self._text).split())


def read(html: str) -> Page:
    reader = _Reader()
    reader.feed(html)
    reader.close()
    return reader.page
