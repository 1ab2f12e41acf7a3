"""What every chart of a span shares: its steps along x (Steps), a step's time and a duration as words."""

from __future__ import annotations

import time
from typing import NamedTuple

#: The drawings' width in SVG units (they scale with the page, their text with them: at the overview's usual
#: width a unit is about a pixel), and the left margin of every chart of a span, where the y axis's labels
#: go: the steps of a span's charts stand one above the other.
WIDTH, LEFT = 400, 44


class Steps(NamedTuple):
    """The steps a span is charted in: `count` steps of `step` seconds from `first` (Unix seconds, a step's
    start), drawn from x = LEFT to WIDTH, each `width` SVG units wide."""

    first: float
    step: float
    count: int

    @classmethod
    def of(cls, now: float, span: float, step: float) -> "Steps":
        """Return the steps of the last `span` seconds to `now` (Unix seconds), `step` seconds each, the last
        the one `now` falls in (as queuectl.api.history aligns them)."""
        count = int(span // step)
        return cls((now // step - count + 1) * step, step, count)

    @property
    def width(self) -> float:
        return (WIDTH - LEFT) / self.count

    def at(self, i: int) -> float:
        """Return step `i`'s start, Unix seconds."""
        return self.first + i * self.step

    def x(self, i: int) -> float:
        """Return step `i`'s left edge, SVG units."""
        return round(LEFT + i * self.width, 2)

    def middle(self, i: int) -> float:
        """Return step `i`'s middle, SVG units."""
        return round(LEFT + (i + 0.5) * self.width, 2)

    def label(self, i: int) -> str:
        """Return step `i`'s start as local time, for a tooltip."""
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(self.at(i)))


def seconds(value: float | None) -> str:
    """Return a duration for a chart's legend or axis ("0.004 s", "2.5 s", "12 s", "3.5 min", "2 h"; "-" for
    none)."""
    if value is None:
        return "-"
    if value < 10:
        return f"{value:.2g} s"
    if value < 120:
        return f"{value:.0f} s"
    return f"{value / 60:.3g} min" if value < 7200 else f"{value / 3600:.3g} h"
