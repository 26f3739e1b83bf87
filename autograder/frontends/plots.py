"""Figures, drawn with matplotlib's Agg canvas (no global backend touched), as PNG bytes: the gradient profile
on a student's feedback page. Pure functions of the values given; nothing here trusts their shape.
"""

from __future__ import annotations

import functools
import io
import math

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

# (profile key, legend label, line style). The student's line is drawn wide and underneath, the references
# thin on top, so a block that matches one of them shows as that reference's line running through the wide one.
CURVES = (
    ("student", "your block", {"color": "#d62728", "lw": 4, "alpha": 0.55, "marker": "o", "ms": 5, "zorder": 1}),
    ("reference", "Pre-LN (what the task asks for)", {"color": "#1f3b99", "lw": 1.6, "ls": "--", "zorder": 4}),
    ("Post-LN", "Post-LN (norm after each addition)", {"color": "#ff7f0e", "lw": 1.6, "zorder": 3}),
    ("no shortcuts", "no shortcuts", {"color": "#2ca02c", "lw": 1.6, "ls": ":", "zorder": 2}),
)
MAX_BLOCKS = 500  # the student's profile comes back from the sandbox: never trust its length


def _series(values) -> tuple[tuple[float, ...], bool] | None:
    """Plottable y values (NaN where a log axis cannot show the value) and whether any were dropped."""
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__"):
        return None
    if not 0 < len(values) <= MAX_BLOCKS:
        return None
    try:
        numbers = [math.nan if v is None else float(v) for v in values]  # None: a value JSON cannot hold (NaN, inf)
    except (TypeError, ValueError, OverflowError):
        return None
    shown = tuple(v if math.isfinite(v) and v > 0 else math.nan for v in numbers)
    if all(math.isnan(v) for v in shown):
        return None
    return shown, any(math.isnan(v) for v in shown)


def _minor_label(value: float, _position) -> str:
    leading = value / 10 ** math.floor(math.log10(value)) if value > 0 else 0
    return f"{value:g}" if round(leading) in (2, 5) else ""


def profile_figure_png(profiles: dict) -> bytes | None:
    """The gradient-profile plot as PNG bytes; None when not even a reference profile can be drawn.

    A student profile with nothing to draw (the block raised, say, or its gradient was 0 or not finite at every
    block) still gets the reference lines, and the title says the student's line is absent (the page's caption says
    why): the references alone show what the student was aiming for.
    """
    profiles = profiles if isinstance(profiles, dict) else {}
    return _render(tuple((key, label, _series(profiles.get(key))) for key, label, _ in CURVES))


@functools.lru_cache(maxsize=32)
def _render(curves: tuple) -> bytes | None:
    """Draw once per distinct set of curves: every page and notebook of one submission shares the picture."""
    figure = Figure(figsize=(8, 5), dpi=100)
    FigureCanvasAgg(figure)  # attaches an Agg canvas to this figure only: no global backend is touched
    figure.subplots_adjust(left=0.12, right=0.97, top=0.92, bottom=0.23)  # fixed margins: layout engines are slow
    axes = figure.add_subplot()
    styles = {key: style for key, _, style in CURVES}
    blocks = 0
    for key, label, series in curves:
        if series is None:
            continue
        ys, dropped = series
        if dropped:
            label += " (zero or invalid values not shown)"
        axes.plot(range(1, len(ys) + 1), ys, label=label, **styles[key])
        blocks = max(blocks, len(ys))
    if blocks == 0:
        return None
    student_missing = curves[0][2] is None
    title = "Gradient at each block's input"
    axes.set_title(title + (": no line of your block to draw, references only" if student_missing else ""))
    axes.set_yscale("log")
    axes.set_xlabel("block (1 = nearest the input)")
    axes.set_ylabel("gradient at each block's input")
    axes.set_xlim(0.5, blocks + 0.5)
    axes.xaxis.get_major_locator().set_params(integer=True)
    # plain numbers (1, 2, 5, 10, 20, ...) read more easily than powers of ten for most students
    axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    low, high = axes.get_ylim()
    if high <= 1e3 * low:  # over more decades, labels at 2 and 5 of each would crowd the axis
        axes.yaxis.set_minor_formatter(FuncFormatter(_minor_label))
    else:
        axes.yaxis.set_minor_formatter(NullFormatter())
    axes.grid(True, which="both", alpha=0.25)
    # below the axes, so the legend never hides a line
    figure.legend(loc="lower center", ncols=2, fontsize="small", frameon=False)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def histogram_png(values: list[float], maximum: float, title: str, xlabel: str) -> bytes:
    """How many students got each score, in bins of one point (or of a twentieth of the maximum)."""
    figure = Figure(figsize=(8, 3.6), dpi=100)
    FigureCanvasAgg(figure)
    figure.subplots_adjust(left=0.09, right=0.98, top=0.88, bottom=0.17)
    axes = figure.add_subplot()
    width = max(1.0, maximum / 20) if maximum > 0 else 1.0
    edges = [i * width for i in range(int(math.ceil((maximum or 1) / width)) + 2)]
    axes.hist(values, bins=edges, color="#1f3b99", edgecolor="white", align="left", rwidth=0.9)
    axes.set_xlim(-width, edges[-1])
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel("students")
    axes.yaxis.get_major_locator().set_params(integer=True)
    axes.grid(True, axis="y", alpha=0.25)
    return _png(figure)


def bars_png(
    labels: list[str], values: list[float], title: str, xlabel: str, limit: float | None = None, color: str = "#1f3b99"
) -> bytes:
    """Horizontal bars, the first label on top, each value written at the end of its bar."""
    figure = Figure(figsize=(8, 0.45 * len(labels) + 1.3), dpi=100)
    FigureCanvasAgg(figure)
    figure.subplots_adjust(
        left=0.42, right=0.93, top=1 - 0.6 / (0.45 * len(labels) + 1.3), bottom=0.55 / (0.45 * len(labels) + 1.3)
    )
    axes = figure.add_subplot()
    positions = list(range(len(labels)))[::-1]
    axes.barh(positions, values, color=color, height=0.6)
    axes.set_yticks(positions, [label if len(label) <= 48 else label[:47] + "…" for label in labels], fontsize=9)
    top = limit if limit is not None else max(values or [1]) * 1.15
    axes.set_xlim(0, top or 1)
    if all(float(v).is_integer() for v in values):
        axes.xaxis.get_major_locator().set_params(integer=True)
    for y, value in zip(positions, values):
        axes.text(value + (top or 1) * 0.01, y, f"{value:g}", va="center", fontsize=9)
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.grid(True, axis="x", alpha=0.25)
    return _png(figure)
