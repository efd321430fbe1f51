"""The Reports' charts as SVG drawn here (no script, no library, nothing inline that the pages' CSP refuses:
colours come from classes in static/parley.css). Each function returns the <svg> text, escaped.

A series' colour says what it counts, the same on every chart (KINDS): failures are red wherever they show,
opt-outs grey, messages in (and the replies to a campaign, which are messages in) blue, and so on."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

# viewBox units; the SVG scales to its box (static/parley.css .chart), about 1:1 at phone width, so that FONT
# stays readable there.
WIDTH, HEIGHT = 380, 220
LEFT, RIGHT, TOP, BOTTOM = 36, 6, 10, 56
FONT = 12
# What a series counts -> its colour class (c-<kind> in static/parley.css): one meaning, one colour.
KINDS = ("in", "out", "ok", "retry", "fail", "optout", "optin", "bot", "model", "person", "other", "median", "p90")


def tick_step(value: float, ticks: int = 4) -> float:
    """The smallest of 1, 2, 5 x 10^n whose `ticks` steps reach value: whole-number gridlines for counts."""
    magnitude = 1
    while True:
        for step in (1, 2, 5):
            if step * magnitude * ticks >= value:
                return step * magnitude
        magnitude *= 10


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:g} %"


def duration(seconds: float | None) -> str:
    """A response time for people: 45 s, 12 min, 3.5 h, 2 d."""
    if seconds is None:
        return "–"
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _svg(title: str, body: str, height: float = HEIGHT) -> str:
    label = escape(title)
    return (f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{label}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{label}</title>{body}</svg>')


def _legend(series: Sequence[tuple[str, Sequence[Any], str]], y: int) -> tuple[str, int]:
    """Swatches and labels from the left, wrapping to a new line at the right edge; returns (svg, lines)."""
    x: float
    parts, x, lines = [], LEFT, 1
    for label, _, kind in series:
        width = 18 + 0.62 * FONT * len(label)
        if x + width > WIDTH and x > LEFT:
            x, y, lines = LEFT, y + FONT + 6, lines + 1
        parts.append(f'<rect class="c-{kind}" x="{x}" y="{y - FONT + 2}" width="{FONT - 1}" height="{FONT - 1}"/>'
                     f'<text class="legend" x="{x + FONT + 3}" y="{y}" font-size="{FONT}">{escape(label)}</text>')
        x += width + 10
    return "".join(parts), lines


def columns(title: str, days: Sequence[str], series: Sequence[tuple[str, Sequence[Any], str]]) -> str:
    """Stacked columns per day: series [(label, [value per day], kind)]; y axis with 5 ticks, x labels thinned to
    fit, legend below."""
    totals = [sum(values[i] for _, values, _ in series) for i in range(len(days))]
    step = tick_step(max(totals, default=0))
    top = 4 * step
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    base = TOP + plot_h
    parts = []
    for k in range(5):  # gridlines and y labels
        y = base - plot_h * k / 4
        parts.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}"/>'
                     f'<text class="axis" x="{LEFT - 4}" y="{y + 4:.1f}" font-size="{FONT}" text-anchor="end">'
                     f'{step * k}</text>')
    slot = plot_w / max(len(days), 1)
    bar = max(slot * 0.7, 1)
    labels = [escape(label) for label, _, _ in series]  # escaped once, not per bar: 90 days x 5 series per page
    for i, day in enumerate(map(escape, days)):
        x, y = LEFT + i * slot + (slot - bar) / 2, base
        for s, (_, values, kind) in enumerate(series):
            h = plot_h * values[i] / top
            if h > 0:
                y -= h
                parts.append(f'<rect class="c-{kind}" x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}">'
                             f'<title>{day} {labels[s]}: {values[i]}</title></rect>')
    every = max(1, -(-len(days) // 5))  # at most 5 day labels
    for i in range(0, len(days), every):
        x = LEFT + i * slot + slot / 2
        parts.append(f'<text class="axis" x="{x:.1f}" y="{base + 14}" font-size="{FONT}" text-anchor="middle">'
                     f'{escape(days[i][5:])}</text>')
    parts.append(f'<line class="axis-line" x1="{LEFT}" y1="{base}" x2="{WIDTH - RIGHT}" y2="{base}"/>')
    legend, lines = _legend(series, base + 2 * FONT + 12)
    parts.append(legend)
    return _svg(title, "".join(parts), base + 2 * FONT + 12 + (lines - 1) * (FONT + 6) + 6)


def bars(title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[Any], str]], format: Callable[[Any], str] = _number) -> str:
    """Horizontal bars, grouped per label: series [(label, [value per label], kind)]; values printed at the bars'
    ends with format."""
    row_h, gap = 12 * len(series) + 4, 8
    height = TOP + len(labels) * (row_h + gap) + 34
    values = [v for _, vs, _ in series for v in vs if v is not None]
    top = max(values, default=0) or 1
    plot_left = 8 + int(0.62 * FONT * 14)
    plot_w = WIDTH - plot_left - 50
    parts = []
    for i, label in enumerate(labels):
        y = TOP + i * (row_h + gap)
        short = label if len(label) <= 14 else label[:13] + "…"
        parts.append(f'<text class="axis" x="{plot_left - 6}" y="{y + row_h / 2 + 4:.1f}" font-size="{FONT}" '
                     f'text-anchor="end">{escape(short)}<title>{escape(label)}</title></text>')
        for s, (name, vs, kind) in enumerate(series):
            value = vs[i]
            w = 0 if value is None else plot_w * value / top
            by = y + 2 + s * 12
            parts.append(f'<rect class="c-{kind}" x="{plot_left}" y="{by}" width="{max(w, 0.5):.1f}" height="10">'
                         f'<title>{escape(label)} {escape(name)}: {escape(format(value))}</title></rect>'
                         f'<text class="value" x="{plot_left + w + 4:.1f}" y="{by + 9}" font-size="{FONT - 1}">'
                         f'{escape(format(value))}</text>')
    legend, lines = _legend(series, height - 10)
    parts.append(legend)
    return _svg(title, "".join(parts), height + (lines - 1) * (FONT + 6))


# Per report: (column, legend label, kind) of each series.
SERIES = {
    "messages": (("inbound", "messages in", "in"), ("outbound", "messages out", "out")),
    "bot-outcomes": (("rule", "answered by a rule", "bot"), ("provider", "answered by the model", "model"),
                     ("handoff", "handed to a person", "person"), ("failed", "failed", "fail"),
                     ("other", "other", "other")),
    "opt-outs": (("optedOut", "opted out", "optout"), ("optedIn", "opted back in", "optin")),
    "campaigns": (("sent", "sent", "ok"), ("failed", "failed", "fail"), ("optedOut", "opted out", "optout"),
                  ("replies", "replies", "in")),
    "first-response": (("medianSeconds", "median", "median"), ("p90Seconds", "9 in 10 within", "p90")),
    "sla-days": (("withinSla", "answered within SLA", "ok"), ("late", "late or breached", "fail")),
    "sla-agents": (("withinSla", "answered within SLA", "ok"), ("late", "late or breached", "fail")),
    "csat-days": (("satisfied", "rated 4 or 5", "ok"), ("unsatisfied", "rated 1 to 3", "fail")),
    "csat-agents": (("percentSatisfied", "CSAT score (% rated 4 or 5)", "ok"),),
}


def chart(report: Mapping[str, Any]) -> str | None:
    """The chart of a report (services/reports.build's result), or None when it has no rows."""
    rows, name = report["rows"], report["report"]
    if not rows:
        return None
    if name.startswith("sla-"):
        rows = [{**r, "late": r["waits"] - r["withinSla"]} for r in rows]
    if name == "csat-days":
        rows = [{**r, "unsatisfied": r["answers"] - r["satisfied"]} for r in rows]
    if name in ("first-response", "campaigns", "sla-agents", "csat-agents"):
        return bars(report["title"], [r["name"] for r in rows],
                    [(label, [r[key] for r in rows], kind) for key, label, kind in SERIES[name]],
                    format=duration if name == "first-response" else _percent if name == "csat-agents" else _number)
    days = [r["day"] for r in rows]
    if name == "deliveries":
        return columns(report["title"], days, [
            ("delivered at once", [r["succeeded"] - r["retriesSucceeded"] for r in rows], "ok"),
            ("delivered on a retry", [r["retriesSucceeded"] for r in rows], "retry"),
            ("failed attempts", [r["failed"] for r in rows], "fail")])
    return columns(report["title"], days, [(label, [r[key] for r in rows], kind) for key, label, kind in SERIES[name]])


def data_rows(report: Mapping[str, Any]) -> str:
    """The <tr> rows of a report's data table (the page's "Data"), escaped: built here rather than cell by cell
    in the template, which took longer than the report's numbers (90 days x 6 columns x 6 reports)."""
    columns = report["columns"]
    timed = [c.endswith("Seconds") for c in columns]

    def cell(value: Any, is_time: bool) -> str:
        return duration(value) if is_time else "" if value is None else str(value)
    return "".join("<tr>" + "".join(f"<td>{escape(cell(row[c], t))}</td>" for c, t in zip(columns, timed)) + "</tr>\n"
                   for row in report["rows"])
