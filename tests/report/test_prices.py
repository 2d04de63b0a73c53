"""`--price`: an hour of each device, by kind or by name as runs record it, on the command line or
in a YAML file given as @FILE; what is not a price refused in one line that says the form."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.core.errors import ExperimentError
from experiments.report.prices import parse_prices

FORM = "DEVICE=NUMBER/h (e.g. --price cuda=2.49/h,cpu=0.05/h, or --price @prices.yaml)"


def test_a_devices_own_price_comes_before_its_kinds() -> None:
    prices = parse_prices("cuda=2.49/h, cpu=0.05/h,cuda:1=3/h")
    assert prices.per_hour == {"cuda": 2.49, "cpu": 0.05, "cuda:1": 3.0}
    assert [prices.of(device) for device in ("cuda:0", "cuda:1", "cpu")] == [2.49, 3.0, 0.05]
    assert parse_prices("cpu=0.05/h").of("cuda:0") is None
    assert prices.refusal(["cpu", "cuda:0", "cuda:1"]) is None
    assert parse_prices("cuda:1=3/h,tpu=1/h").refusal(["cuda:0", "cpu", "cuda:0"]) == (
        "--price names cuda:1, tpu, which no run used; the runs used cpu, cuda:0"
    )


def test_a_prices_file_is_a_yaml_mapping_given_after_an_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("prices.yaml").write_text("cuda: 2.49/h\ncuda:0: 1e0 / h\n")
    assert parse_prices("@prices.yaml").per_hour == {"cuda": 2.49, "cuda:0": 1.0}
    for text, refused in [
        ("cpu: 0.05\n", "prices.yaml: `cpu: 0.05` is not DEVICE: NUMBER/h (e.g. `cuda: 2.49/h`)"),
        ("a: &x 1/h\nb: *x\n", "prices.yaml holds a YAML alias (*name); a prices file maps "),
        ("- 1/h\n", "prices.yaml is not a mapping of device to price; a prices file maps "),
    ]:
        Path("prices.yaml").write_text(text)
        with pytest.raises(ExperimentError) as error:
            parse_prices("@prices.yaml")
        assert str(error.value).startswith(refused)
    with pytest.raises(ExperimentError) as without_at:
        parse_prices("prices.yaml")
    assert str(without_at.value) == "price 'prices.yaml' is a file: give it as --price @prices.yaml"


@pytest.mark.parametrize(
    ("given", "refused"),
    [
        ("cuda", f"price 'cuda' is not {FORM}"),
        ("=2/h", f"price '=2/h' is not {FORM}"),
        ("cuda=2.49", f"price cuda=2.49 is not {FORM}"),
        ("cuda=2.49/s", f"price cuda=2.49/s is not {FORM}"),
        ("cuda=nan/h", f"price cuda=nan/h is not {FORM}"),
        ("cuda=1-2/h", f"price cuda=1-2/h is not {FORM}"),
        ("cuda=1/h,cuda=2/h", "--price gives cuda twice; give each device once"),
        (
            "cpu=-0.05/h",
            "price cpu=-0.05/h is negative: a price is what an hour of the device costs, above 0; "
            "leave out a device that costs nothing",
        ),
        ("cpu=0/h", "price cpu=0/h is 0: a price is what an hour of the device costs, above 0; "),
    ],
)
def test_what_is_not_a_price_is_refused_saying_the_form(given: str, refused: str) -> None:
    with pytest.raises(ExperimentError) as error:
        parse_prices(given)
    assert str(error.value).startswith(refused) and "\n" not in str(error.value)
