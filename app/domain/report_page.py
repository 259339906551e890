"""One self-contained HTML page a person opens in a browser (an exported run, an eval's results): the page's frame
and style, tables and escaping. Pure text: the callers write the file and the pictures beside it."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2937; margin: 0;
       background: #f9fafb; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 28px 48px; background: #fff; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; }
.meta { color: #4b5563; margin: 0 0 16px; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #d1d5db; padding: 5px 9px; vertical-align: top; text-align: left; }
th { background: #f3f4f6; } table.facts th { font-weight: 600; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.note { background: #fef3c7; border-left: 4px solid #d97706; padding: 8px 12px; margin: 10px 0; }
.bad { color: #b91c1c; } .good { color: #166534; }
img.figure { max-width: 100%; border: 1px solid #e5e7eb; }
img.shot { max-width: 100%; max-height: 420px; border: 1px solid #e5e7eb; display: block; margin: 6px 0; }
.bar { display: inline-block; height: 10px; background: #2563eb; vertical-align: middle; margin-right: 2px; }
.bar.act { background: #16a34a; } .bar.wait { background: #9ca3af; }
code { background: #f3f4f6; padding: 1px 4px; border-radius: 3px; }
"""


def document(title: str, body: str) -> str:
    """A whole page: `body` is HTML already escaped by its maker."""
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{STYLE}</style></head>\n<body><main>\n{body}\n</main></body></html>\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    """A table of plain-text cells (escaped here); the columns in `numeric` right-aligned."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td class=\"num\">{escape(c)}</td>" if i in numeric else f"<td>{escape(c)}</td>"
                                    for i, c in enumerate(row)) + "</tr>\n" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>"


def facts(rows: Sequence[Sequence[str]]) -> str:
    """A two-column table of named values (plain text, escaped here): the name in the first column, no header."""
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>\n" for k, v in rows)
    return f"<table class=\"facts\"><tbody>\n{body}</tbody></table>"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = ()) -> list[str]:
    """The same table in Markdown (a pipe in a cell escaped, line breaks folded)."""
    def cell(text: str) -> str:
        return " ".join(str(text).split()).replace("|", "\\|")

    rule = ["---:" if i in numeric else "---" for i in range(len(headers))]
    return ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "|".join(rule) + "|",
            *("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)]


__all__ = ["document", "escape", "facts", "markdown_table", "table"]
