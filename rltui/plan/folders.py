"""rltui's one state folder and what lives in it, for every face and the equivalent script.

$XDG_STATE_HOME/rltui, or ~/.local/state/rltui: the XDG Base Directory spec says a relative
XDG_STATE_HOME is invalid and must be ignored, so it is.
- xpk/<project>/<cluster>/   where xpk runs (its ./xpkclusters state: delete needs it)
- runs/<project>/<cluster>/  progress.json, jobs.json, rltui.log, jobs/<stamp>/ (job folders)
- cache/                     public data kept a while (the cost meter's prices, a day)
"""

from __future__ import annotations

import re
from pathlib import Path

from ..statedir import state_root

_COMPONENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # one path component, never ".."


def _checked(project: str, cluster: str) -> tuple[str, str]:
    """Both as one path component each. env.sh's validation (config.py) refuses what would fail
    here first (a domain-scoped PROJECT_ID with its ':' among them), so this is a last guard."""
    for what, value in (("PROJECT_ID", project), ("CLUSTER_NAME", cluster)):
        if not _COMPONENT.fullmatch(value):
            raise ValueError(f"{what} {value!r} cannot name a folder")
    return project, cluster


def xpk_subdir(project: str, cluster: str) -> str:
    """Where xpk runs for a cluster, relative to the state folder (the script uses it too)."""
    return "/".join(("xpk", *_checked(project, cluster)))


def runs_subdir(project: str, cluster: str) -> str:
    return "/".join(("runs", *_checked(project, cluster)))


def run_dir(project: str, cluster: str, root: Path | None = None) -> Path:
    return (root or state_root()) / runs_subdir(project, cluster)


def cache_dir(root: Path | None = None) -> Path:
    return (root or state_root()) / "cache"
