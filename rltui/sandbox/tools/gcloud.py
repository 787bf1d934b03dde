"""A fake `gcloud` for the sandbox: the commands the codelab and rltui run, with gcloud's argv,
output, --format and errors (`ERROR: (gcloud.x.y) CODE: message` on stderr, exit 1; compute
commands print `ERROR: (gcloud.compute.x.y) Could not fetch resource:` and ` - message`, as the real
one does; usage errors exit 2). Status lines go to stderr and resources to stdout, as gcloud does.

Run as `python -m rltui.sandbox.tools.gcloud ARGS` (control URL from $RLTUI_SANDBOX_CONTROL)
or through the wrapper `install_tools` writes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rltui.sandbox.tools import ControlError, run
from rltui.sandbox.tools import gcloud_commands as c
from rltui.sandbox.tools.gcloud_commands import VERSION, Fail, Inv, status
from rltui.sandbox.tools.output import FormatError, parse as parse_format

# Every flag any command takes: "value" flags take an argument, "bool" flags take none.
FLAGS: dict[str, str] = {
    **dict.fromkeys(("project", "format", "verbosity", "account", "configuration", "billing-project",
                     "impersonate-service-account", "location", "region", "zone", "network", "ranges",
                     "service", "purpose", "prefix-length", "addresses", "description", "capacity-gib",
                     "per-unit-storage-throughput", "filesystem", "labels", "update-addons"), "value"),
    **dict.fromkeys(("quiet", "help", "version", "log-http", "user-output-enabled", "async", "force",
                     "global", "enabled", "gke-support-enabled"), "bool"),
}
GLOBAL_FLAGS = frozenset({"project", "format", "verbosity", "account", "configuration", "billing-project",
                          "impersonate-service-account", "quiet", "help", "log-http", "user-output-enabled"})


class _Located(Exception):
    """A Fail with the command it belongs to (gcloud.lustre.instances.describe)."""

    def __init__(self, where: str, fail: Fail) -> None:
        super().__init__(fail.message)
        self.where = where
        self.fail = fail


@dataclass(frozen=True)
class Command:
    run: Callable[[Inv], int | None]
    flags: frozenset[str] = frozenset()
    required: tuple[str, ...] = ()
    positional: tuple[str, int, int] = ("", 0, 0)  # metavar, min, max (-1: any)


def _flags(*names: str) -> frozenset[str]:
    return frozenset(names)


_LOC = c.LOCATION_FLAGS
_LUSTRE_CREATE = ("location", "capacity-gib", "per-unit-storage-throughput", "filesystem", "network")
COMMANDS: dict[tuple[str, ...], Command] = {
    ("services", "enable"): Command(c.services_enable, _flags("async"), (), ("SERVICE", 1, -1)),
    ("services", "list"): Command(c.services_list, _flags("enabled")),
    ("services", "vpc-peerings", "connect"): Command(
        c.peerings_connect, _flags("service", "ranges", "network", "async"), ("network", "ranges")),
    ("services", "vpc-peerings", "update"): Command(
        c.peerings_update, _flags("service", "ranges", "network", "force", "async"), ("network", "ranges")),
    ("services", "vpc-peerings", "delete"): Command(
        c.peerings_delete, _flags("service", "network", "async"), ("network",)),
    ("services", "vpc-peerings", "list"): Command(c.peerings_list, _flags("service", "network"), ("network",)),
    ("compute", "networks", "list"): Command(c.networks_list),
    ("compute", "networks", "describe"): Command(c.networks_describe, positional=("NAME", 1, 1)),
    ("compute", "addresses", "create"): Command(
        c.addresses_create,
        _flags("global", "region", "purpose", "prefix-length", "network", "addresses", "description"),
        (), ("NAME", 1, -1)),
    ("compute", "addresses", "describe"): Command(
        c.addresses_describe, _flags("global", "region"), (), ("NAME", 1, 1)),
    ("compute", "addresses", "delete"): Command(
        c.addresses_delete, _flags("global", "region"), (), ("NAME", 1, -1)),
    ("compute", "addresses", "list"): Command(c.addresses_list, _flags("global")),
    ("lustre", "instances", "create"): Command(
        c.lustre_create, _flags(*_LUSTRE_CREATE, "gke-support-enabled", "labels", "description", "async"),
        _LUSTRE_CREATE, ("INSTANCE", 1, 1)),
    ("lustre", "instances", "describe"): Command(
        c.lustre_describe, _flags("location"), ("location",), ("INSTANCE", 1, 1)),
    ("lustre", "instances", "delete"): Command(
        c.lustre_delete, _flags("location", "async"), ("location",), ("INSTANCE", 1, 1)),
    ("lustre", "instances", "list"): Command(c.lustre_list, _flags("location")),
    ("container", "clusters", "describe"): Command(c.clusters_describe, _flags(*_LOC), (), ("NAME", 1, 1)),
    ("container", "clusters", "list"): Command(c.clusters_list, _flags(*_LOC)),
    ("container", "clusters", "update"): Command(
        c.clusters_update, _flags(*_LOC, "update-addons", "async"), ("update-addons",), ("NAME", 1, 1)),
    ("container", "clusters", "get-credentials"): Command(
        c.clusters_get_credentials, _flags(*_LOC), (), ("NAME", 1, 1)),
    ("config", "get"): Command(c.config_get, positional=("PROPERTY", 1, 1)),
    ("config", "get-value"): Command(c.config_get, positional=("PROPERTY", 1, 1)),
    ("config", "set"): Command(c.config_set, positional=("PROPERTY VALUE", 2, 2)),
    ("config", "list"): Command(c.config_list),
    ("auth", "list"): Command(c.auth_list),
    ("version",): Command(c.version),
}
GROUPS = {path[:k] for path in COMMANDS for k in range(len(path))}


def split_argv(argv: list[str]) -> tuple[list[str], dict[str, Any], list[str]]:
    """(words, flags, unknown flags): --flag=value and --flag value; --no-FLAG for booleans."""
    words: list[str] = []
    flags: dict[str, Any] = {}
    unknown: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            words += argv[i + 1:]
            break
        if tok in ("-q", "-h"):
            flags["quiet" if tok == "-q" else "help"] = True
        elif tok.startswith("--"):
            name, eq, value = tok[2:].partition("=")
            kind = FLAGS.get(name)
            if kind is None and name.startswith("no-") and FLAGS.get(name[3:]) == "bool":
                flags[name[3:]] = False
            elif kind is None:
                unknown.append(tok)
            elif kind == "bool":
                flags[name] = value.lower() not in ("false", "0", "no") if eq else True
            else:
                if not eq:
                    i += 1
                    if i >= len(argv):
                        raise Fail(f"argument --{name}: expected one argument", 2)
                    value = argv[i]
                flags[name] = value
        elif tok.startswith("-") and len(tok) > 1:
            unknown.append(tok)
        else:
            words.append(tok)
        i += 1
    return words, flags, unknown


def resolve(words: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """The command path and its positional arguments."""
    node: tuple[str, ...] = ()
    for i, word in enumerate(words):
        if node + (word,) in COMMANDS:
            return node + (word,), words[i + 1:]
        if node + (word,) not in GROUPS:
            choices = sorted({p[len(node)] for p in GROUPS | set(COMMANDS)
                              if len(p) > len(node) and p[:len(node)] == node})
            raise _Located(".".join(("gcloud",) + node), Fail(
                f"Invalid choice: '{word}'.\nThe sandbox's gcloud knows: {', '.join(choices)}", 2))
        node += (word,)
    raise _Located(".".join(("gcloud",) + node), Fail("Command name argument expected.", 2))


def _usage(path: tuple[str, ...], cmd: Command) -> str:
    metavar, low, _ = cmd.positional
    flags = " ".join(f"--{f}" + ("=VALUE" if FLAGS[f] == "value" else "") for f in sorted(cmd.flags))
    words = ["gcloud", *path, metavar if low else "", flags, "[GCLOUD_WIDE_FLAG ...]"]
    return "Usage: " + " ".join(w for w in words if w)


def dispatch(argv: list[str], url: str | None, properties: Path | None) -> int:
    words, flags, unknown = split_argv(argv)
    if flags.get("version") and not words:
        sys.stdout.write(VERSION)
        return 0
    path, args = resolve(words)
    cmd = COMMANDS[path]
    inv = Inv(path, args, flags, url, properties)
    try:
        if flags.get("help"):
            sys.stdout.write(_usage(path, cmd) + "\n")
            return 0
        extra = unknown + [f"--{f}" for f in flags if f not in cmd.flags | GLOBAL_FLAGS]
        metavar, low, high = cmd.positional
        if high != -1 and len(args) > high:
            extra += args[high:]
        if extra:
            raise Fail(f"unrecognized arguments: {' '.join(extra)}\n{_usage(path, cmd)}", 2)
        if len(args) < low:
            raise Fail(f"argument {metavar}: Must be specified.\n{_usage(path, cmd)}", 2)
        for name in cmd.required:
            if not flags.get(name):
                raise Fail(f"Missing required argument [--{name}]: Must be specified.\n{_usage(path, cmd)}", 2)
        if flags.get("format"):
            parse_format(flags["format"])
        return cmd.run(inv) or 0
    except FormatError as exc:
        raise _Located(inv.name, Fail(str(exc))) from None
    except Fail as exc:
        raise _Located(inv.name, exc) from None
    except ControlError as exc:
        if path[0] == "compute" and exc.code != "UNAVAILABLE":
            # gcloud compute's form for any API refusal: two lines, the second the API's message
            # (FACTS.md: `ERROR: (gcloud.compute.addresses.describe) Could not fetch resource:` then
            # ` - The resource 'projects/P/global/addresses/N' was not found`).
            raise _Located(inv.name, Fail(f"Could not fetch resource:\n - {exc.message}")) from None
        raise _Located(inv.name, Fail(f"{exc.code}: {exc.message}")) from None


def main(argv: list[str] | None = None, control_url: str | None = None, properties: Path | str | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return dispatch(argv, control_url, Path(properties) if properties else None)
    except _Located as exc:
        status(f"ERROR: ({exc.where}) {exc.fail.message}")
        return exc.fail.code
    except Fail as exc:
        status(f"ERROR: (gcloud) {exc.message}")
        return exc.code
    except KeyboardInterrupt:
        status("\n\nCommand killed by keyboard interrupt\n")
        return 1


if __name__ == "__main__":
    run(main)
