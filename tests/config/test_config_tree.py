"""docs/configs.md's tree of conf/ names every config group, and every option of each, that
conf/ holds: an option added to conf/ is added to the tree users read."""

from __future__ import annotations

import re

from helpers import ROOT

CONF = ROOT / "conf"


def _tree() -> dict[str, str]:
    """The tree's text of each folder of conf/ (its line and the lines that carry it on)."""
    text = (ROOT / "docs" / "configs.md").read_text()
    tree = text.split("```text\nconf/\n", 1)[1].split("```", 1)[0]
    folders: dict[str, str] = {"": ""}
    folder = ""
    for line in tree.splitlines():
        if named := re.match(r"[├└]── (\S+?)/\s", line):
            folder = named[1]
            folders[folder] = line
        elif re.match(r"[├└]── ", line):  # files at the top: train.yaml, eval.yaml
            folder = ""
            folders[""] += line
        else:
            folders[folder] += line
    return folders


def test_the_docs_tree_names_every_group_and_option_in_conf() -> None:
    tree = _tree()
    for path in sorted(CONF.rglob("*.yaml")):
        parts = path.relative_to(CONF).parts
        if len(parts) == 1:  # train.yaml, eval.yaml
            assert path.name in tree[""], path.name
            continue
        group = parts[0]
        assert group in tree, f"docs/configs.md's tree has no {group}/"
        # Hydra's own groups by their subgroup (launcher/slurm.yaml, job_logging); the others by
        # each option.
        named = parts[1] if group == "hydra" else path.stem
        assert re.search(rf"\b{re.escape(named)}\b", tree[group]), f"{group}/: {named}"
