"""Self-contained HTML pages (report.html, compare.html): one file that works offline, styles and
images inline (PNGs as data: URIs), no script and nothing fetched, readable on a laptop screen and
printable. The pieces every page shares: the shell, a table, a figure, a state badge.

    page("hvdbench report", [table(["layout", "throughput"], [["1x1", "100"]])])
"""

from __future__ import annotations

import base64
import csv
from html import escape
from pathlib import Path

# One stylesheet: narrow enough for 1366 px, compact enough that the verdict fits the first screen
# (768 px), tables scroll sideways inside their box rather than widening the page, and print drops
# the colours' backgrounds but keeps the states readable as words.
STYLE = """
*{box-sizing:border-box}
body{font:14px/1.35 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1320px;
 padding:8px 16px;color:#1b1f24;background:#fff}
h1{font-size:19px;margin:2px 0}h2{font-size:16px;margin:18px 0 6px;border-bottom:1px solid #d0d7de}
h3{font-size:14px;margin:10px 0 4px}
p.meta{margin:0 0 6px;color:#57606a;font-size:12.5px}
.box{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:12.5px;margin:4px 0}
th,td{border:1px solid #d0d7de;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f6f8fa;position:sticky;top:0}
td.num{text-align:right;font-variant-numeric:tabular-nums}
table.verdict td{white-space:nowrap}table.verdict td.detail{white-space:normal;max-width:520px}
table.verdict td.src{white-space:normal;max-width:300px;color:#57606a;font-size:11.5px}
.state{display:inline-block;min-width:88px;text-align:center;font-weight:600;border-radius:3px;padding:0 4px}
.pass{background:#dafbe1;color:#116329}.warn{background:#fff8c5;color:#7d4e00}
.fail{background:#ffebe9;color:#a40e26}.nm{background:#eaeef2;color:#424a53}
.faster{color:#116329;font-weight:600}.slower{color:#a40e26;font-weight:600}
figure{margin:6px 0 12px}figure img{max-width:100%;height:auto;border:1px solid #eaeef2}
figcaption{font-size:12px;color:#57606a}
details{margin:4px 0}pre{white-space:pre-wrap;font-size:12px;background:#f6f8fa;padding:6px}
nav{font-size:12.5px;margin:4px 0}nav a{margin-right:8px}
@media print{body{max-width:none}.box{overflow:visible}th{position:static}a{color:inherit}
 section{break-inside:avoid-page}figure{break-inside:avoid}}
"""

STATE_CLASS = {"pass": "pass", "warn": "warn", "fail": "fail", "not measured": "nm",
               "faster": "pass", "slower": "fail", "within noise": "nm", "not compared": "nm"}


def page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            # No request may leave the page: a policy that allows only what is inline.
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
            "style-src 'unsafe-inline'\">"
            f"<title>{escape(title)}</title><style>{STYLE}</style></head>\n<body>\n" + "\n".join(body)
            + "\n</body></html>\n")


def state(text: str) -> str:
    return f"<span class=\"state {STATE_CLASS.get(text, 'nm')}\">{escape(text)}</span>"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip() not in ("", "nan")


def number(text: str) -> str:
    """A CSV cell's float as a reader of the page wants it: 4 significant digits, an exponent past 1e4."""
    try:
        value = float(text)
    except ValueError:
        return text
    return text if value == int(value) and "." not in text and "e" not in text else f"{value:.4g}"


def table(header: list[str], rows: list[list[str]], cls: str = "", raw: bool = False) -> str:
    """A table; cells escaped (raw: cells are HTML already), numbers right-aligned."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for c in row:
            if raw:
                cells.append(f"<td>{c}</td>")
            elif _is_number(c):
                cells.append(f"<td class=\"num\">{escape(number(c))}</td>")
            else:
                cells.append(f"<td>{escape(c)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f"<div class=\"box\"><table{f' class={chr(34)}{cls}{chr(34)}' if cls else ''}><thead><tr>{head}</tr>"
            f"</thead><tbody>{''.join(body)}</tbody></table></div>")


def csv_table(path: Path, most: int = 60) -> str:
    """A CSV the report wrote, as a table (its first `most` rows; the file holds them all)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    if not rows:
        return ""
    header, body = rows[0], rows[1:]
    more = f"<p class=\"meta\">{len(body) - most} more row(s) in {escape(path.name)}</p>" if len(body) > most else ""
    if not body:
        return f"<p class=\"meta\">{escape(path.name)}: no rows</p>"
    return f"<h3>{escape(path.name)}</h3>" + table(header, body[:most]) + more


def figure(png: Path, caption: str) -> str:
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    return (f"<figure><img alt=\"{escape(png.name)}\" src=\"data:image/png;base64,{data}\">"
            f"<figcaption>{escape(png.name)}: {escape(caption)}</figcaption></figure>")


def preformatted(text: str, summary: str) -> str:
    return f"<details><summary>{escape(summary)}</summary><pre>{escape(text)}</pre></details>" if text.strip() else ""
