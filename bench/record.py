"""bench/RESULTS.md, which every benchmark here appends its section to."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


def append_to_results(lines: list[str]) -> None:
    """Append a section (its lines, the `###` header first) to RESULTS.md, and say so."""
    with open(RESULTS, "a", encoding="utf-8") as file:
        file.write("\n".join(lines).strip("\n") + "\n\n")
    print(f"appended to {RESULTS}")
