"""environment.json's list of installed packages, read from the headers of their metadata."""

from __future__ import annotations

from importlib.metadata import distributions
from pathlib import Path

import pytest

from experiments.records import environment


def test_the_packages_are_what_importlib_parses_from_their_metadata() -> None:
    parsed = dict(sorted((d.metadata["Name"], d.version) for d in distributions()))
    assert environment.installed_packages() == parsed
    assert {"torch", "hydra-core", "omegaconf"} <= set(parsed)


def test_only_the_headers_name_a_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A description that quotes headers of its own (after the blank line) changes nothing."""
    info = tmp_path / "quoting-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: quoting\nVersion: 1.0\n\nName: other\nVersion: 9.9\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    packages = environment.installed_packages()
    assert packages["quoting"] == "1.0"
    assert "other" not in packages
