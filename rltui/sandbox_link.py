"""The faces' one door to the local sandbox, a distribution of its own (`rltui-sandbox`, in
sandbox/ of this repository; `pip install 'rltui[sandbox]'`).

rltui reaches it only here and only through `rltui_sandbox.contract`, whose major version must
match CONTRACT_MAJOR. Choosing the sandbox's endpoints is the faces' business (cli, headless,
gallery); the engine only gets the Endpoints they chose.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import ModuleType

    from .cloud.endpoints import Endpoints

# The major version of the sandbox contract this rltui speaks (sandbox/CHANGELOG.md).
CONTRACT_MAJOR = 1
INSTALL_HINT = "pip install 'rltui[sandbox]' (in a checkout: `make sandbox`, or pip install . ./sandbox)"
# `sandbox start --quota` name for the Lustre capacity quota (GiB per zone and network): the metric
# the sandbox's Lustre refusal names (sandbox/rltui_sandbox/world_lustre.py).
LUSTRE_QUOTA = "lustre.googleapis.com/capacity"


class SandboxProblem(Exception):
    """The sandbox is not installed, speaks another contract, or would not start (one line)."""


def contract() -> ModuleType:
    """`rltui_sandbox.contract`, or SandboxProblem naming what to install."""
    try:
        from rltui_sandbox import contract as module
    except ImportError as exc:
        raise SandboxProblem(f"the sandbox is not installed ({exc}): {INSTALL_HINT}") from None
    version = str(getattr(module, "CONTRACT_VERSION", "0"))
    if _major(version) != CONTRACT_MAJOR:
        raise SandboxProblem(f"the installed sandbox speaks contract {version}, this rltui "
                             f"{CONTRACT_MAJOR}.x: install the one from this rltui's checkout ({INSTALL_HINT})")
    missing = module.missing_dependencies() if hasattr(module, "missing_dependencies") else []
    if missing:
        raise SandboxProblem(f"the sandbox's dependencies are missing ({', '.join(missing)}): {INSTALL_HINT}")
    return module


def _major(version: str) -> int:
    """The major number of a contract version ("1.1" -> 1); -1 when it is not one."""
    head = version.partition(".")[0]
    return int(head) if head.isdigit() else -1


def check_status(info: dict[str, Any]) -> dict[str, Any]:
    """A running daemon's status JSON, refused when an older or newer sandbox wrote it."""
    if _major(str(info.get("contract", "0"))) != CONTRACT_MAJOR:
        raise contract().SandboxError("the running sandbox speaks another contract version than this rltui: "
                                      "restart it (rltui sandbox stop && rltui sandbox start)")
    return info


def endpoints_for(sandbox: bool) -> Endpoints:
    """Google Cloud, or the local sandbox (started if it is not running)."""
    from .cloud.endpoints import Endpoints

    if not sandbox:
        return Endpoints.google()
    link = contract()
    try:
        status = link.read_status() or link.start()
        return Endpoints.sandbox(check_status(status.info))
    except link.SandboxError as exc:
        raise SandboxProblem(str(exc)) from None


def cmd_sandbox(args: argparse.Namespace) -> int:
    """`rltui sandbox start|status|stop|env|preempt|stall`."""
    from .cli import UsageError

    try:
        manage = contract()
    except SandboxProblem as exc:
        print(f"sandbox: {exc}", file=sys.stderr)
        return 1
    try:
        if args.action == "start":
            if args.speed <= 0:
                raise UsageError(f"--speed: must be above 0, got {args.speed}")
            if not 0 <= args.faults <= 1:
                raise UsageError(f"--faults: a probability from 0 to 1, got {args.faults}")
            if args.profile and not Path(args.profile).is_file():
                raise UsageError(f"--profile: {args.profile}: no such file")
            quotas, problems = {}, []
            lustre_gib = None
            for item in args.quota or []:
                metric, _, limit = item.partition("=")
                if metric.strip() == LUSTRE_QUOTA:
                    if not limit.strip().isdigit():
                        problems.append(f"--quota: {item!r}: {LUSTRE_QUOTA} takes whole GiB")
                    else:
                        lustre_gib = int(limit)
                    continue
                try:
                    quotas[metric.strip()] = float(limit)
                    if not metric.strip() or quotas[metric.strip()] < 0:
                        raise ValueError
                except ValueError:
                    problems.append(f"--quota: {item!r}: use METRIC=LIMIT, e.g."
                                    " PREEMPTIBLE_NVIDIA_B200_GPUS=16")
            for permission in args.deny or []:
                if not re.fullmatch(r"[a-z][A-Za-z0-9]*(\.[A-Za-z0-9]+){2}", permission):
                    problems.append(f"--deny: {permission!r} is not a permission like lustre.instances.create")
            kuberay = None
            if args.kuberay_version is not None:
                try:
                    kuberay = manage.kuberay_version(args.kuberay_version)
                except ValueError as exc:
                    problems.append(f"--kuberay-version: {exc}")
            unavailable = []
            for item in args.capacity or []:
                try:
                    unavailable.append(manage.capacity_knob(item))
                except ValueError as exc:
                    problems.append(str(exc))
            if problems:
                raise UsageError("\n".join(problems))
            status = manage.start(args.speed, args.faults, args.seed, args.profile,
                                  quotas=quotas, lustre_quota_gib=lustre_gib, denied=args.deny,
                                  kuberay_version=kuberay, unavailable_capacity=unavailable)
            check_status(status.info)  # one already running may be another version's
            print(f"sandbox running (pid {status.pid}): gRPC {status.info['grpc']},"
                  f" Kubernetes {status.info['kube_api']}, KubeRay {status.info.get('kuberay_version')},"
                  f" state in {manage.sandbox_dir()}")
            if kuberay is not None and status.info.get("kuberay_version") != kuberay:
                print(f"sandbox: it was already running with KubeRay {status.info.get('kuberay_version')}:"
                      " `rltui sandbox stop` first to change it", file=sys.stderr)
        elif args.action == "status":
            status = manage.read_status()
            if args.json:
                import json

                print(json.dumps(status.info if status else None, indent=2))
            elif status:
                for key, value in status.info.items():
                    print(f"{key:14} {value}")
            else:
                print(f"no sandbox running (state dir {manage.sandbox_dir()})")
            return 0 if status else 1
        elif args.action == "stop":
            ended = manage.stop()
            print(f"sandbox stopped ({len(ended)} processes ended)" if ended else "no sandbox was running")
        elif args.action == "env":
            status = manage.read_status()
            if not status:
                print("sandbox: no sandbox running: start it with `rltui sandbox start`", file=sys.stderr)
                return 1
            check_status(status.info)
            tools, missing = manage.shell_tools(status)
            for line in missing:   # on stderr: eval reads only stdout
                print(f"sandbox env: {line}", file=sys.stderr)
            print("\n".join(manage.env_lines(status, tools)))
        elif args.action == "preempt":
            status = manage.read_status()
            if not status:
                raise UsageError("no sandbox running: start it with `rltui sandbox start`")
            if args.hard and args.head:
                raise UsageError("--hard takes a Ray worker's node: the sandbox restarts a lost Ray head's"
                                 " process as its kubelet would, which a VM gone without a shutdown cannot")
            check_status(status.info)
            print(manage.preempt(status, args.node, head=args.head, hard=args.hard))
        elif args.action == "stall":
            status = manage.read_status()
            if not status:
                raise UsageError("no sandbox running: start it with `rltui sandbox start`")
            check_status(status.info)
            if not hasattr(manage, "stall"):  # contract 1.2 added it
                print(f"sandbox: the installed sandbox (contract {manage.CONTRACT_VERSION}) has no `stall`:"
                      f" {INSTALL_HINT}", file=sys.stderr)
                return 1
            print(manage.stall(status, args.job))
    except manage.SandboxError as exc:
        print(f"sandbox: {exc}", file=sys.stderr)
        return 1
    return 0
