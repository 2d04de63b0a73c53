"""The report's arithmetic: 95% confidence intervals by Student's t, of a mean and of a difference,
unpaired (Welch's) or paired, assuming independent runs roughly normal on their scale."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# scipy.special's quantile, which scipy.stats' `t.ppf` calls: scipy.stats is far slower to import.
from scipy.special import stdtrit

CONFIDENCE = 0.95


def t_quantile(degrees_of_freedom: float) -> float:
    """The two-sided 95% quantile of Student's t (Welch's degrees of freedom need not be whole)."""
    return float(stdtrit(degrees_of_freedom, (1 + CONFIDENCE) / 2))


@dataclass(frozen=True)
class Estimate:
    """A mean, a difference or a ratio, and its 95% confidence interval."""

    value: float
    low: float
    high: float

    def holds(self, no_change: float) -> bool:
        """Whether the interval holds `no_change` (0 for a difference, 1 for a ratio)."""
        return self.low <= no_change <= self.high

    def exp(self) -> Estimate:
        """From the log scale back: a log-difference's estimate as a ratio's."""
        return Estimate(math.exp(self.value), math.exp(self.low), math.exp(self.high))


def _around(mean: float, standard_error: float, degrees_of_freedom: float) -> Estimate:
    # mean ± t(0.975, df) · se; exact where every value is alike.
    if standard_error == 0:
        return Estimate(mean, mean, mean)
    half_width = t_quantile(degrees_of_freedom) * standard_error
    return Estimate(mean, mean - half_width, mean + half_width)


def mean_interval(values: Sequence[float]) -> Estimate:
    """The mean of two values or more with its interval."""
    n = len(values)
    return _around(statistics.fmean(values), statistics.stdev(values) / math.sqrt(n), n - 1)


def welch(first: Sequence[float], second: Sequence[float]) -> Estimate:
    """first - second of unpaired runs by Welch's t; two values or more a side."""
    difference = statistics.fmean(first) - statistics.fmean(second)
    shares = [statistics.variance(values) / len(values) for values in (first, second)]
    squared_error = sum(shares)
    if squared_error == 0:
        return Estimate(difference, difference, difference)
    degrees_of_freedom = squared_error**2 / sum(
        share**2 / (len(values) - 1) for share, values in zip(shares, (first, second), strict=True)
    )
    return _around(difference, math.sqrt(squared_error), degrees_of_freedom)


def paired(first: Sequence[float], second: Sequence[float]) -> Estimate:
    """first - second of paired runs (a seed each), whose shared state cancels out; two or more."""
    return mean_interval([a - b for a, b in zip(first, second, strict=True)])


@dataclass(frozen=True)
class Spread:
    """n values' mean, sample sd and the mean's 95% interval (none of either for one value)."""

    n: int
    mean: float
    sd: float | None
    interval: tuple[float, float] | None


def spread(values: Sequence[float]) -> Spread:
    if len(values) < 2:
        return Spread(len(values), statistics.fmean(values), None, None)
    mean = mean_interval(values)
    return Spread(len(values), mean.value, statistics.stdev(values), (mean.low, mean.high))


def log_spread(values: Sequence[float]) -> Spread:
    """The spread of positive values on the log scale: its interval stays above 0."""
    logs = spread([math.log(value) for value in values])
    interval = logs.interval and (math.exp(logs.interval[0]), math.exp(logs.interval[1]))
    sd = None if logs.sd is None else math.exp(logs.sd)
    return Spread(logs.n, math.exp(logs.mean), sd, interval)
