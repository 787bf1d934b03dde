"""The fake gcloud's commands: one function per command, over the sandbox's control API.

A command reads its parsed invocation (Inv), asks the sandbox, prints status lines on stderr
and the resource on stdout (formatted by --format), and raises Fail to refuse.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rltui.sandbox.tools import (
    ACCOUNT, call, canonical_property, control_url, printer, property_value, read_properties,
    write_properties,
)
from rltui.atomic import write_private
from rltui.sandbox.tools.output import FormatError, render

VERSION = "Google Cloud SDK 550.0.0 (rltui sandbox fake)\ncore 2026.01.01\n"
LOCATION_FLAGS = ("location", "region", "zone")
PROJECT_UNSET = (
    "The required property [project] is not currently set.\n"
    "It can be set on a per-command basis by re-running your command with the [--project] flag.\n\n"
    "You may set it for your current workspace by running:\n\n  $ gcloud config set project VALUE\n\n"
    "or it can be set temporarily by the environment variable [CLOUDSDK_CORE_PROJECT]")


class Fail(Exception):
    """A refusal printed as gcloud prints it; code 2 for usage errors."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass
class Inv:
    """One parsed invocation."""

    path: tuple[str, ...]
    args: list[str]
    flags: dict[str, Any]
    url: str | None
    properties: Path | None

    @property
    def name(self) -> str:
        return ".".join(("gcloud",) + self.path)

    def flag(self, name: str, default: Any = None) -> Any:
        return self.flags.get(name, default)

    def project(self) -> str:
        project = self.flag("project") or property_value("project", self.properties)
        if not project:
            raise Fail(PROJECT_UNSET)
        return project

    def location(self) -> str:
        given = [self.flags[f] for f in LOCATION_FLAGS if self.flags.get(f)]
        if len(given) > 1:
            raise Fail("argument --location | --region | --zone: At most one of these can be specified.", 2)
        value = given[0] if given else (property_value("compute/region", self.properties)
                                        or property_value("compute/zone", self.properties))
        if not value:
            raise Fail("One of [--location, --region, --zone] must be supplied.")
        return value

    def call(self, op: str, **args: Any) -> Any:
        return call(control_url(self.url), op, args, printer(sys.stderr))

    def show(self, data: Any, default: str, *, many: bool = False) -> None:
        spec = self.flag("format") or default
        try:
            text = render(data, spec, many=many)
        except FormatError as exc:
            raise Fail(str(exc)) from None
        sys.stdout.write(text)
        if many and not data and not self.flag("format"):
            status("Listed 0 items.")

    def confirm(self, message: str) -> None:
        """gcloud's prompt: skipped by --quiet; without a terminal the default (yes) holds."""
        if self.flag("quiet"):
            return
        status(message)
        if sys.stdin.isatty():
            sys.stderr.write("Do you want to continue (Y/n)?  ")
            sys.stderr.flush()
            if sys.stdin.readline().strip().lower() in ("n", "no"):
                raise Fail("Aborted by user.")


def status(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _int_flag(inv: Inv, name: str) -> int:
    value = inv.flag(name)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise Fail(f"argument --{name}: Invalid value {value!r}: must be an integer.", 2) from None


def _labels(text: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, (text or "").split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise Fail(f"argument --labels: Bad syntax for dict arg: [{item}]. Please see `gcloud topic flags-file` "
                       "or `gcloud topic escaping` for information on providing list or dictionary flag values "
                       "with special characters.", 2)
        out[key] = value
    return out


def _basename(value: str) -> str:
    return value.rstrip("/").rsplit("/", 1)[-1]


# ---- services --------------------------------------------------------------------------------------


def services_enable(inv: Inv) -> None:
    inv.call("services.enable", project=inv.project(), services=inv.args)


def services_list(inv: Inv) -> None:
    items = inv.call("services.list", project=inv.project())
    inv.show(items, "table(config.name:label=NAME,config.title:label=TITLE)", many=True)


def _peering_args(inv: Inv) -> dict[str, Any]:
    return {"project": inv.project(), "network": _basename(inv.flag("network")),
            "service": inv.flag("service") or "servicenetworking.googleapis.com"}


def peerings_connect(inv: Inv) -> None:
    inv.call("peerings.connect", ranges=inv.flag("ranges").split(","), **_peering_args(inv))


def peerings_update(inv: Inv) -> None:
    inv.call("peerings.update", ranges=inv.flag("ranges").split(","), force=bool(inv.flag("force")),
             **_peering_args(inv))


def peerings_delete(inv: Inv) -> None:
    inv.call("peerings.delete", **_peering_args(inv))


def peerings_list(inv: Inv) -> None:
    items = inv.call("peerings.list", project=inv.project(), network=_basename(inv.flag("network")))
    inv.show(items, "yaml", many=True)


# ---- compute networks and addresses ---------------------------------------------------------------------


def networks_list(inv: Inv) -> None:
    items = inv.call("networks.list", project=inv.project())
    inv.show(items, "table(name,x_gcloud_subnet_mode:label=SUBNET_MODE,x_gcloud_bgp_routing_mode:label="
                    "BGP_ROUTING_MODE,IPv4Range:label=IPV4_RANGE,gatewayIPv4:label=GATEWAY_IPV4)", many=True)


def networks_describe(inv: Inv) -> None:
    inv.show(inv.call("networks.describe", project=inv.project(), name=inv.args[0]), "yaml")


def _global_only(inv: Inv) -> None:
    if not inv.flag("global"):
        raise Fail("the sandbox has global addresses only: add --global (regional addresses are not emulated)")


def addresses_create(inv: Inv) -> None:
    _global_only(inv)
    project = inv.project()
    prefix = _int_flag(inv, "prefix-length") if inv.flag("prefix-length") is not None else 16
    for name in inv.args:
        addr = inv.call("addresses.create", project=project, name=name,
                        network=_basename(inv.flag("network") or "default"),
                        purpose=inv.flag("purpose") or "VPC_PEERING", prefix_length=prefix,
                        address=inv.flag("addresses"))
        status(f"Created [{addr['selfLink']}].")
        if inv.flag("format"):
            inv.show(addr, "yaml")


def addresses_describe(inv: Inv) -> None:
    _global_only(inv)
    inv.show(inv.call("addresses.describe", project=inv.project(), name=inv.args[0]), "yaml")


def addresses_delete(inv: Inv) -> None:
    _global_only(inv)
    project = inv.project()
    inv.confirm("The following global addresses will be deleted:\n" + "".join(f" - [{n}]\n" for n in inv.args))
    for name in inv.args:
        addr = inv.call("addresses.delete", project=project, name=name)
        status(f"Deleted [{addr['selfLink']}].")


def addresses_list(inv: Inv) -> None:
    items = inv.call("addresses.list", project=inv.project())
    inv.show(items, "table(name,address:label=ADDRESS/RANGE,addressType:label=TYPE,purpose,network.basename(),"
                    "region.basename(),subnetwork.basename():label=SUBNET,status)", many=True)


# ---- Managed Lustre ----------------------------------------------------------------------------------------


def lustre_create(inv: Inv) -> None:
    result = inv.call(
        "lustre.create", project=inv.project(), location=inv.flag("location"), instance_id=inv.args[0],
        capacity_gib=_int_flag(inv, "capacity-gib"),
        per_unit_storage_throughput=_int_flag(inv, "per-unit-storage-throughput"),
        filesystem=inv.flag("filesystem"), network=inv.flag("network"),
        gke_support_enabled=bool(inv.flag("gke-support-enabled")), labels=_labels(inv.flag("labels")),
        description=inv.flag("description"), **{"async": bool(inv.flag("async"))})
    if inv.flag("format"):
        inv.show(result, "yaml")


def lustre_describe(inv: Inv) -> None:
    inv.show(inv.call("lustre.describe", project=inv.project(), location=inv.flag("location"),
                      instance_id=inv.args[0]), "yaml")


def lustre_delete(inv: Inv) -> None:
    project = inv.project()
    inv.confirm(f"You are about to delete instance [{inv.args[0]}].\n")
    inv.call("lustre.delete", project=project, location=inv.flag("location"), instance_id=inv.args[0],
             **{"async": bool(inv.flag("async"))})


def lustre_list(inv: Inv) -> None:
    items = inv.call("lustre.list", project=inv.project(), location=inv.flag("location") or "-")
    inv.show(items, "table(name.basename():label=INSTANCE_ID,state,capacityGib:label=CAPACITY_GIB,"
                    "perUnitStorageThroughput:label=THROUGHPUT,filesystem,mountPoint:label=MOUNT_POINT)", many=True)


# ---- GKE clusters --------------------------------------------------------------------------------------------


def clusters_describe(inv: Inv) -> None:
    inv.show(inv.call("clusters.describe", project=inv.project(), location=inv.location(), name=inv.args[0]), "yaml")


def clusters_list(inv: Inv) -> None:
    has_location = any(inv.flag(f) for f in LOCATION_FLAGS)
    items = inv.call("clusters.list", project=inv.project(), location=inv.location() if has_location else "-")
    inv.show(items, "table(name,location,currentMasterVersion:label=MASTER_VERSION,endpoint:label=MASTER_IP,"
                    "nodePools[0].config.machineType:label=MACHINE_TYPE,currentNodeVersion:label=NODE_VERSION,"
                    "currentNodeCount:label=NUM_NODES,status)", many=True)


def _addons(text: str) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for item in filter(None, text.split(",")):
        name, eq, value = item.partition("=")
        if not eq or value.upper() not in ("ENABLED", "DISABLED"):
            raise Fail(f"argument --update-addons: Bad syntax for dict arg: [{item}]; use ADDON=ENABLED|DISABLED", 2)
        out[name] = value.upper() == "ENABLED"
    if not out:
        raise Fail("argument --update-addons: expected ADDON=ENABLED|DISABLED[,...]", 2)
    return out


def clusters_update(inv: Inv) -> None:
    result = inv.call("clusters.update", project=inv.project(), location=inv.location(), name=inv.args[0],
                      addons=_addons(inv.flag("update-addons")), **{"async": bool(inv.flag("async"))})
    if inv.flag("format"):
        inv.show(result, "yaml")


def clusters_get_credentials(inv: Inv) -> None:
    status("Fetching cluster endpoint and auth data.")
    creds = inv.call("clusters.credentials", project=inv.project(), location=inv.location(), name=inv.args[0])
    merge_kubeconfig(creds["context"], creds["server"], creds["token"], creds.get("ca") or "")
    status(f"kubeconfig entry generated for {inv.args[0]}.")


def kubeconfig_path() -> Path:
    first = next((p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p), "")
    return Path(first).expanduser() if first else Path.home() / ".kube" / "config"


def merge_kubeconfig(context: str, server: str, token: str, ca_b64: str = "") -> Path:
    """Add or replace cluster, user and context `context` and make it current, keeping the rest."""
    import yaml

    path = kubeconfig_path()
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        config = {}
    if not isinstance(config, dict):
        raise Fail(f"{path} is not a kubeconfig (a YAML mapping)")
    config.setdefault("apiVersion", "v1")
    config.setdefault("kind", "Config")
    config.setdefault("preferences", {})
    cluster = {"server": server, **({"certificate-authority-data": ca_b64} if ca_b64 else {})}
    entries = {"clusters": ("cluster", cluster), "users": ("user", {"token": token}),
               "contexts": ("context", {"cluster": context, "user": context})}
    for section, (key, body) in entries.items():
        items = [e for e in (config.get(section) or []) if isinstance(e, dict) and e.get("name") != context]
        config[section] = items + [{"name": context, key: body}]
    config["current-context"] = context
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_private(path, yaml.safe_dump(config, sort_keys=False))


# ---- config, auth, version ----------------------------------------------------------------------------------


def config_get(inv: Inv) -> None:
    value = property_value(inv.args[0], inv.properties)
    if value is None:
        status("(unset)")
    else:
        sys.stdout.write(value + "\n")


def config_set(inv: Inv) -> None:
    if inv.properties is None:
        raise Fail("this sandbox gcloud has no configuration file: use --project or $CLOUDSDK_CORE_PROJECT")
    name = canonical_property(inv.args[0])
    props = read_properties(inv.properties)
    props[name] = inv.args[1]
    write_properties(inv.properties, props)
    status(f"Updated property [{name}].")


def config_list(inv: Inv) -> None:
    sections: dict[str, list[str]] = {}
    names = {"core/account", "core/project", *read_properties(inv.properties)}
    for name in sorted(names):
        value = property_value(name, inv.properties)
        if value is not None:
            section, _, key = name.partition("/")
            sections.setdefault(section, []).append(f"{key} = {value}")
    sys.stdout.write("".join(f"[{s}]\n" + "".join(line + "\n" for line in lines) for s, lines in sections.items()))
    status("\nYour active configuration is: [default]")


def auth_list(inv: Inv) -> None:
    if inv.flag("format"):
        inv.show([{"account": ACCOUNT, "status": "ACTIVE"}], "", many=True)
        return
    sys.stdout.write(f"       Credentialed Accounts\nACTIVE  ACCOUNT\n*       {ACCOUNT}\n\n"
                     "To set the active account, run:\n    $ gcloud config set account `ACCOUNT`\n\n")


def version(inv: Inv) -> None:
    sys.stdout.write(VERSION)
