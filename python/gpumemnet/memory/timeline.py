"""Allocation history and reports: record_history, dump_history, plot_timeline, memory_summary.

In a notebook, memory_summary() shows as an HTML table and plot_timeline() (no path) as an inline SVG; in a
terminal both stay plain text.

The events come from the allocator's per-device ring (csrc/allocator.c): one per alloc, free and category retag
(a retag is a -bytes/+bytes pair), each with its time, signed block bytes, category, scope and the device's
allocated bytes after it. Nothing here allocates on a device, so reading the history does not change it.

Per-category curves are rebuilt backwards from memory_stats' current bytes per category: every change to a
category is an event, so this is exact even when the ring has dropped its oldest events."""
import html
import json

from .. import _C
from .._core.dtype import device_str
from .policy import describe as _describe_policy
from .stats import CATEGORIES, format_bytes

# One colour per category, readable side by side (Okabe-Ito, colour-blind safe).
COLORS = {"parameter": "#0072B2", "gradient": "#E69F00", "optimizer": "#CC79A7", "activation": "#009E73",
          "activation_grad": "#F0E442", "workspace": "#D55E00", "input": "#56B4E9",
          "communication": "#000000", "other": "#999999"}
FIELDS = ("t_ns", "delta", "category", "scope", "allocated", "kind", "location")
MAX_COLUMNS = 2000  # the timeline keeps at most this many events (per bucket, the one with most allocated)


def record_history(enabled=True, max_entries=100000, device="cpu"):
    """Start recording allocation events on device (a fresh ring keeping the newest max_entries), or stop and
    drop them (enabled=False). Off by default; while off the allocator pays one branch per alloc/free."""
    if isinstance(max_entries, bool) or not isinstance(max_entries, int):
        raise TypeError(f"record_history: max_entries must be an int, got {type(max_entries).__name__}")
    _C.record_history(device_str(device), bool(enabled), max_entries if enabled else 0)


def history(device="cpu"):
    """The recorded events, oldest first, as dicts with keys t_ns, delta, category, scope, allocated, kind and
    location: "device", or where a block that fell back lives ("host", "file": set_fallback), allocated then being
    that location's bytes."""
    return [dict(zip(FIELDS, e)) for e in _C.get_history(device_str(device))]


def _category_series(events, stats):
    """bytes[c][i]: category c's bytes after event i, walking back from the current figures (after the first
    half of a retag pair the block is in neither category)."""
    cur = {c: stats["by_category"][c]["current"] for c in CATEGORIES}
    series = {c: [0] * len(events) for c in CATEGORIES}
    for i in range(len(events) - 1, -1, -1):
        for c in CATEGORIES:
            series[c][i] = cur[c]
        cur[events[i]["category"]] -= events[i]["delta"]
    return series


def dump_history(path, device="cpu"):
    """Write the history as JSON: {"device", "events": [...], "at_peak": memory_stats(device)["at_peak"],
    "peak_allocated", "allocated"}. Returns the dict written."""
    dev = device_str(device)
    stats = _C.memory_stats(dev)
    doc = {"device": dev, "events": history(dev), "at_peak": stats["at_peak"],
           "peak_allocated": stats["allocated"]["peak"], "allocated": stats["allocated"]["current"],
           "by_category": {c: stats["by_category"][c]["current"] for c in CATEGORIES}}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return doc


def _columns(events):
    """Indices of the events drawn: all of them, or per bucket the one with most allocated (peaks survive).
    The state between the two halves of a retag is not drawn: it would show the block in no category."""
    idx = [i for i, e in enumerate(events) if not (e["kind"] == "retag" and e["delta"] < 0)]
    n = len(idx)
    if n <= MAX_COLUMNS:
        return idx
    return [max(idx[b * n // MAX_COLUMNS:(b + 1) * n // MAX_COLUMNS], key=lambda i: events[i]["allocated"])
            for b in range(MAX_COLUMNS)]


def _timeline(device):
    dev = device_str(device)
    events = [e for e in history(dev) if e["location"] == "device"]  # the curves are the device's own bytes
    if not events:
        raise RuntimeError(f"plot_timeline: no history recorded on {dev}; call "
                           f"record_history(device={dev!r}) before the code to observe")
    series = _category_series(events, _C.memory_stats(dev))
    present = [c for c in CATEGORIES if any(series[c])]
    peak = max(range(len(events)), key=lambda i: events[i]["allocated"])  # the first one reaching it
    return dev, events, series, present, peak


def _svg(dev, events, series, present, peak, width=960, height=420):
    left, right, top, bottom = 80, 170, 40, 50
    pw, ph = width - left - right, height - top - bottom
    cols = _columns(events)
    n = len(events)
    ymax = max(e["allocated"] for e in events) or 1
    x = (lambda i: left + pw * i / (n - 1)) if n > 1 else (lambda i: left + pw / 2)
    y = lambda v: top + ph * (1 - v / ymax)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<text x="{left}" y="20" font-size="14">allocated bytes by category on {html.escape(dev)} '
           f'({n} events)</text>']
    base = [0] * len(cols)
    for c in present:  # stacked: each layer from the running base to base + its bytes
        topv = [base[k] + series[c][i] for k, i in enumerate(cols)]
        upper = " ".join(f"{x(i):.2f},{y(v):.2f}" for i, v in zip(cols, topv))
        lower = " ".join(f"{x(i):.2f},{y(v):.2f}" for i, v in reversed(list(zip(cols, base))))
        out.append(f'<path class="layer" data-category="{c}" fill="{COLORS[c]}" fill-opacity="0.85" '
                   f'd="M{upper} L{lower} Z"><title>{c}</title></path>')
        base = topv
    for k in range(5):  # y axis
        v = ymax * k / 4
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.2f}" y2="{y(v):.2f}" stroke="#ddd"/>'
                   f'<text x="{left - 6}" y="{y(v) + 4:.2f}" text-anchor="end">{format_bytes(v)}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 12}" text-anchor="middle">event index</text>')
    e = events[peak]
    label = f"peak {format_bytes(e['allocated'])} at event {peak}: {e['scope'] or '(no scope)'} ({e['category']})"
    out.append(f'<line class="peak" x1="{x(peak):.2f}" x2="{x(peak):.2f}" y1="{top}" y2="{top + ph}" '
               f'stroke="#000" stroke-dasharray="4 3"/>'
               f'<text class="peak-label" x="{left}" y="{top - 6}">{html.escape(label)}</text>')
    for k, c in enumerate(present):  # legend
        ly = top + 18 * k
        out.append(f'<rect x="{left + pw + 16}" y="{ly}" width="12" height="12" fill="{COLORS[c]}"/>'
                   f'<text x="{left + pw + 34}" y="{ly + 10}">{c}</text>')
    out.append("</svg>")
    return "\n".join(out), label


def plot_timeline(path=None, device="cpu"):
    """Draw the recorded history as a stacked area of allocated bytes by category over event index, the peak
    marked and labelled with its scope. path ending in .png: a matplotlib figure (matplotlib required);
    otherwise a self-contained HTML page with an inline SVG (no network, no scripts). Returns path.
    Without a path: a Timeline, which a notebook shows inline (SVG)."""
    if path is None:
        return inline_timeline(device)
    dev, events, series, present, peak = _timeline(device)
    if str(path).lower().endswith(".png"):
        return _plot_png(path, dev, events, series, present, peak)
    svg, label = _svg(dev, events, series, present, peak)
    page = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>gpumemnet memory timeline ({html.escape(dev)})</title></head>\n<body>\n{svg}\n"
            f"<p>{html.escape(label)}</p>\n</body></html>\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path


def _plot_png(path, dev, events, series, present, peak):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError(f"plot_timeline: writing {path!r} needs matplotlib ({e}); install it, or give a path "
                          "ending in .html for the self-contained SVG timeline") from None
    cols = _columns(events)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.stackplot(cols, [[series[c][i] for i in cols] for c in present], labels=present,
                 colors=[COLORS[c] for c in present])
    e = events[peak]
    ax.axvline(peak, color="k", linestyle="--", linewidth=1)
    ax.set_title(f"peak {format_bytes(e['allocated'])} at event {peak}: {e['scope'] or '(no scope)'}", fontsize=10)
    ax.set_xlabel("event index")
    ax.set_ylabel("allocated bytes")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


class MemorySummary(str):
    """What memory_summary() returns: the report's text (a str: print it, as with torch.cuda.memory_summary()),
    and in a notebook an HTML table (_repr_html_)."""

    def __new__(cls, text, device, rows, notes):
        self = super().__new__(cls, text)
        self.device, self._rows, self._notes = device, rows, notes
        return self

    def _repr_html_(self):
        e = html.escape
        out = ['<table class="gpumemnet" style="border-collapse:collapse;font-family:monospace">',
               f'<caption style="text-align:left;font-weight:bold">gpumemnet memory summary: {e(self.device)}'
               '</caption>', "<tr>" + "".join(f'<th style="text-align:left;padding:0 8px">{h}</th>'
                                              for h in ("category", "current", "at the peak")) + "</tr>"]
        for name, cur, atp in self._rows:
            out.append(f'<tr><td style="padding:0 8px">{e(name)}</td><td style="padding:0 8px">{e(cur)}</td>'
                       f'<td style="padding:0 8px">{e(atp)}</td></tr>')
        out.append("</table>")
        return "\n".join(out) + "\n<pre>" + e("\n".join(self._notes)) + "</pre>"


class Timeline:
    """plot_timeline() without a path: the recorded history drawn as an inline SVG, shown as such in a notebook
    (_repr_html_, _repr_svg_); its repr in a terminal is one line naming the peak. .svg is the SVG text."""

    def __init__(self, svg, label, device):
        self.svg, self.label, self.device = svg, label, device

    def _repr_html_(self):
        return self.svg

    def _repr_svg_(self):
        return self.svg

    def __repr__(self):
        return f"<memory timeline of {self.device}: {self.label}>"


def inline_timeline(device="cpu"):
    """The recorded history (record_history) as a Timeline: a stacked area of allocated bytes by category over
    event index, the peak marked; a notebook shows it inline (SVG), plot_timeline(path) writes it to a file."""
    dev, events, series, present, peak = _timeline(device)
    svg, label = _svg(dev, events, series, present, peak)
    return Timeline(svg, label, dev)


def memory_summary(device="cpu"):
    """A readable report of memory_stats(device): by category the current bytes and the bytes at the moment of
    the peak (those add up to the peak; each category's own highest value, reached at other moments, would not:
    it is in memory_stats), then the cache (reserved, cached but free, largest free block, segments) and the
    allocator's counters. Returns a MemorySummary: a str, shown as an HTML table in a notebook."""
    dev = device_str(device)
    s = _C.memory_stats(dev)
    at = s["at_peak"]
    rows = [(c, s["by_category"][c]["current"], at["by_category"][c]) for c in CATEGORIES]
    rows.append(("total allocated", s["allocated"]["current"], s["allocated"]["peak"]))
    w = 76
    lines = ["=" * w, f" gpumemnet memory summary: {dev}".ljust(w), "=" * w,
             f" {'category':<18}{'current':>18}{'at the peak':>18}", "-" * w]
    for name, cur, atp in rows:
        if name == "total allocated":
            lines.append("-" * w)
        lines.append(f" {name:<18}{format_bytes(cur):>18}{format_bytes(atp):>18}")
    lines.append("-" * w)
    notes = []
    if s["allocated"]["peak"]:
        notes.append(f" peak reached by a {format_bytes(at['request'])} {at['category']} request"
                     f" in {at['scope'] or '(no scope)'}")
    limit = format_bytes(s["limit"]) if s["limit"] else "none"
    segments = s["num_segment_allocs"] - s["num_segment_frees"]
    notes += [f" reserved {format_bytes(s['reserved']['current'])} (peak {format_bytes(s['reserved']['peak'])})"
              f" · cached but free {format_bytes(s['cached_free'])}"
              f" · largest free block {format_bytes(s['largest_free_block'])}",
              f" segments {segments} (allocated {s['num_segment_allocs']}, freed {s['num_segment_frees']})"
              f" · capacity {format_bytes(s['capacity'])} · limit {limit}",
              f" allocs {s['num_allocs']} · frees {s['num_frees']} · retries {s['num_retries']}"
              f" · ooms {s['num_ooms']}"] + _describe_policy(dev) + [" categories: gm.memory.CATEGORY_DOCS"]
    lines += notes + ["=" * w]
    return MemorySummary("\n".join(lines), dev,
                         [(n, format_bytes(c), format_bytes(a)) for n, c, a in rows], notes)
