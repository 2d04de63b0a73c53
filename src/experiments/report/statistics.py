"""The report's arithmetic: Student's t tests of a mean and of a difference, unpaired (Welch's)
or paired, with their confidence intervals (95% unless a family of comparisons asks for more) and
p-values, assuming independent runs roughly normal on their scale."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# scipy.special's quantile, which scipy.stats' `t.ppf` calls: scipy.stats is far slower to import.
from scipy.special import stdtr, stdtrit

CONFIDENCE = 0.95


def t_quantile(degrees_of_freedom: float, confidence: float = CONFIDENCE) -> float:
    """The two-sided quantile of Student's t (Welch's degrees of freedom need not be whole)."""
    return float(stdtrit(degrees_of_freedom, (1 + confidence) / 2))


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


@dataclass(frozen=True)
class TTest:
    """A mean or a difference with its standard error: its interval at a confidence, its p-value."""

    value: float
    standard_error: float
    degrees_of_freedom: float

    def interval(self, confidence: float = CONFIDENCE) -> Estimate:
        """value ± t(confidence, df) · se; exact where every value is alike."""
        half_width = 0.0
        if self.standard_error:
            half_width = t_quantile(self.degrees_of_freedom, confidence) * self.standard_error
        return Estimate(self.value, self.value - half_width, self.value + half_width)

    @property
    def p_value(self) -> float:
        """Two-sided, of no change (0): the least error rate whose interval would exclude it."""
        if not self.standard_error:
            return 1.0 if self.value == 0 else 0.0
        return float(2 * stdtr(self.degrees_of_freedom, -abs(self.value) / self.standard_error))


def mean_test(values: Sequence[float]) -> TTest:
    """The mean of two values or more."""
    n = len(values)
    return TTest(statistics.fmean(values), statistics.stdev(values) / math.sqrt(n), n - 1)


def welch(first: Sequence[float], second: Sequence[float]) -> TTest:
    """first - second of unpaired runs by Welch's t; two values or more a side."""
    difference = statistics.fmean(first) - statistics.fmean(second)
    shares = [statistics.variance(values) / len(values) for values in (first, second)]
    squared_error = sum(shares)
    if squared_error == 0:
        return TTest(difference, 0.0, math.inf)
    degrees_of_freedom = squared_error**2 / sum(
        share**2 / (len(values) - 1) for share, values in zip(shares, (first, second), strict=True)
    )
    return TTest(difference, math.sqrt(squared_error), degrees_of_freedom)


def paired(first: Sequence[float], second: Sequence[float]) -> TTest:
    """first - second of paired runs (a seed each), whose shared state cancels out; two or more."""
    return mean_test([a - b for a, b in zip(first, second, strict=True)])


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
    mean = mean_test(values).interval()
    return Spread(len(values), mean.value, statistics.stdev(values), (mean.low, mean.high))


def log_spread(values: Sequence[float]) -> Spread:
    """The spread of positive values on the log scale: its interval stays above 0."""
    logs = spread([math.log(value) for value in values])
    interval = logs.interval and (math.exp(logs.interval[0]), math.exp(logs.interval[1]))
    sd = None if logs.sd is None else math.exp(logs.sd)
    return Spread(logs.n, math.exp(logs.mean), sd, interval)
