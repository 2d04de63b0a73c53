"""What the report made at the end of every sweep spends its time on: each run's config parsed
once, and Student's t from scipy.special, never the slow-to-import scipy.stats."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from omegaconf.errors import ReadonlyConfigError
from scipy import stats

from experiments.report import statistics
from experiments.report.run_configs import run_config


def test_a_runs_config_is_parsed_once_while_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("model:\n  name: lenet\n")
    first = run_config(path)
    assert run_config(path) is first  # the report's three readers share one parse
    with pytest.raises(ReadonlyConfigError):  # which none of them can change for the others
        first.model.name = "tudui"
    path.write_text("model:\n  name: tudui_net\n")  # rewritten (a resumed run's snapshot)
    assert OmegaConf.select(run_config(path), "model.name") == "tudui_net"


@pytest.mark.parametrize("degrees_of_freedom", [1, 2, 7, 13.7])
def test_the_intervals_quantile_is_scipy_stats_own(degrees_of_freedom: float) -> None:
    assert statistics.t_quantile(degrees_of_freedom) == stats.t.ppf(0.975, degrees_of_freedom)


def test_the_report_leaves_scipy_stats_unloaded() -> None:
    # 0.7 s of a sweep's end on a 2-core EPYC, for a quantile scipy.special has. The modules
    # that use scipy are imported (all of the report's would add torch's seconds, not scipy).
    loaded = (
        "from experiments.report import repeats, statistics, verdicts; import sys; "
        "print('scipy.stats' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", loaded], capture_output=True, text=True, check=True
    )
    assert done.stdout == "False\n"
