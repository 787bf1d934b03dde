"""Preflight: what must hold before `up` (env.sh, gcloud's account, ADC, the tools on PATH,
xpk's gcloud folder, the codelab's APIs), then what the cloud can tell before anything is
created (quotas, permissions, names taken, the machine type: plan/checks.py). Each check passes,
fails with its fix, or is unknown (ok None: what it needs cannot be read yet)."""

from __future__ import annotations

import asyncio
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Problem, RLConfig
from ..words import count
from .codelab import APIS

if TYPE_CHECKING:
    from ..cloud.endpoints import Endpoints
    from .context import Context


@dataclass(frozen=True)
class Check:
    """One preflight check: passed (ok True), failed with the fix (False), or unknown (None)."""
    name: str
    ok: bool | None
    detail: str = ""
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.ok is False

    @property
    def mark(self) -> str:
        return {True: "ok", False: "FAIL", None: "??"}[self.ok]


async def auth_checks(endpoints: Endpoints) -> list[Check]:
    """gcloud's signed-in account, and Application Default Credentials (the same check in both
    modes: the endpoints' ADC, Google's or the sandbox's file)."""
    from ..cloud.tools import run_tool

    checks = []
    try:
        res = await run_tool(["gcloud", "auth", "list", "--format=json"], endpoints, timeout_s=30)
        accounts = [a.get("account", "") for a in json.loads(res.stdout or "[]")
                    if a.get("status") == "ACTIVE"] if res.ok else []
        checks.append(Check("gcloud auth", bool(accounts), ", ".join(accounts),
                            "" if accounts else "gcloud auth login"))
    except Exception as exc:  # noqa: BLE001 - no gcloud: the tool check below says so
        checks.append(Check("gcloud auth", False, str(exc)[:120], "install gcloud, then gcloud auth login"))
    try:
        await asyncio.to_thread(endpoints.credentials)
        checks.append(Check("Application Default Credentials", True, "found"))
    except Exception:  # noqa: BLE001 - DefaultCredentialsError and friends
        checks.append(Check("Application Default Credentials", False, "not found",
                            "gcloud auth application-default login"))
    return checks


# xpk's docs (docs/installation.md, "Install XPK", option A: `pip install xpk`), pinned to the
# release rltui drives (its flags: tests/data/xpk_1.16.0_flags.json).
XPK_VERSION = "1.16.0"
XPK_INSTALL = f"pip install xpk=={XPK_VERSION}"


def xpk_missing(endpoints: Endpoints) -> str | None:
    """One line when `xpk` is not on the PATH rltui gives it (the endpoints' tool folders
    first: the sandbox's bin folder in sandbox mode), else None. `up` cannot create the
    cluster without it, so it refuses before anything is created."""
    env = endpoints.subprocess_env()
    if shutil.which("xpk", path=env.get("PATH")):
        return None
    first = ", ".join(str(d) for d in endpoints.tool_dirs)
    where = f"looked in {first} first, then PATH" if first else "looked in PATH"
    return (f"xpk is not on PATH ({where}): install it with `{XPK_INSTALL}` (xpk's docs: pip"
            " install xpk), then run up again; nothing was created")


async def preflight(env_path: Path, cfg: RLConfig | None, problems: list[Problem], endpoints: Endpoints,
                    ctx: Context | None, *, cloud: bool = True) -> list[Check]:
    """The local checks, and with a context the APIs; with `cloud` also plan/checks.py's."""
    n = len(problems)
    # Beside the check's name, its folder: the default path would read "env.sh  env.sh".
    folder = await asyncio.to_thread(lambda: env_path.absolute().parent)   # getcwd
    checks = [Check("env.sh", cfg is not None,
                    count(n, "problem") if problems else f"valid, in {folder}",
                    "fix the fields on the Configure screen" if problems else "")]
    env = endpoints.subprocess_env()
    checks += await auth_checks(endpoints)
    for tool in ("xpk", "gcloud", "kubectl"):
        found = shutil.which(tool, path=env.get("PATH"))
        checks.append(Check(f"{tool} on PATH", bool(found), found or "",
                            "" if found else (XPK_INSTALL if tool == "xpk" else
                                              f"install {tool} (Cloud Shell has it)")))
    # xpk 1.16.0 exits 1 ("Failed to find gcloud credential directory") without it
    # (xpk src/xpk/commands/cluster_gcluster.py check_gcloud_authenticated).
    config_dir = endpoints.xpk_gcloud_dir(env)
    checks.append(Check("gcloud config (for xpk)", config_dir.is_dir(), str(config_dir),
                        "" if config_dir.is_dir() else "gcloud auth application-default login (it creates the folder)"))
    if ctx is not None:
        try:
            enabled = await ctx.network.enabled_apis()
        except Exception as exc:  # noqa: BLE001 - shown as a failed check with its reason
            checks.append(Check("project reachable", False, str(exc)[:200], "gcloud auth application-default login"))
            return checks
        missing = set(APIS) - enabled
        short = sorted(api.removesuffix(".googleapis.com") for api in missing)
        # Off is no failure: `up` (and the Provision screen) turn them on; --check never does.
        checks.append(Check("APIs enabled", True if not missing else None,
                            ("off: " + ", ".join(short)) if short else "all four",
                            "up enables them (the Provision screen too)" if missing else ""))
        if cloud:
            from .checks import cloud_checks

            checks += await cloud_checks(ctx, enabled)
    return checks
