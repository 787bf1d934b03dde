"""Terraform's state of one deployment: which of the blueprint's resources exist, by address,
and which are tainted.

Kept where gcluster keeps it, `<deployment folder>/primary/terraform.tfstate` (xpk 1.16.0
commands/cluster_gcluster.py: the deployment folder under ./xpkclusters/gcluster-out/<prefix>/;
the blueprint sets no remote backend unless --cluster-state-gcs-bucket), in Terraform's state
format version 4 (`resources[].instances[].status` "tainted" marks a resource to replace), or
in memory for World-level callers that pass no folder. Written after every resource that gets
an id, so a killed xpk leaves what it made in the state; real Terraform persists its state
periodically during an apply and at its end (the exact interval is not modelled).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rltui_sandbox.toolkit.blueprint import TERRAFORM_VERSION, Res


@dataclass
class Instance:
    address: str
    kind: str
    name: str
    attributes: dict[str, Any] = field(default_factory=dict)
    tainted: bool = False


class State:
    """The state of one deployment; `path` None keeps it in `memory` (a dict the caller owns)."""

    def __init__(self, path: Path | None, memory: dict[str, Any] | None = None) -> None:
        self.path = path
        self._memory = memory if memory is not None else {}
        self.serial = 0
        self.lineage = str(uuid.uuid4())
        self.instances: dict[str, Instance] = {}
        self._load()

    def __contains__(self, address: str) -> bool:
        return address in self.instances

    def get(self, address: str) -> Instance | None:
        return self.instances.get(address)

    def put(self, res: Res, **attributes: Any) -> Instance:
        inst = Instance(res.address, res.kind, res.name, {"name": res.name, **res.spec, **attributes})
        self.instances[res.address] = inst
        self.save()
        return inst

    def taint(self, address: str) -> None:
        if address in self.instances:
            self.instances[address].tainted = True
            self.save()

    def drop(self, address: str) -> None:
        if self.instances.pop(address, None) is not None:
            self.save()

    # ---- persistence, in Terraform's v4 layout ---------------------------------------------------

    def _doc(self) -> dict[str, Any]:
        resources = []
        for inst in self.instances.values():
            module, _, rest = inst.address.rpartition(".google_") if ".google_" in inst.address else \
                inst.address.rpartition(".")
            kind_name = ("google_" + rest) if ".google_" in inst.address else rest
            rtype, _, name = kind_name.partition(".")
            entry: dict[str, Any] = {"attributes": {**inst.attributes, "id": inst.attributes.get("id", "")}}
            if inst.tainted:
                entry["status"] = "tainted"
            resources.append({"module": module, "mode": "managed", "type": rtype, "name": name,
                              "address": inst.address, "rltui_kind": inst.kind, "instances": [entry]})
        return {"version": 4, "terraform_version": TERRAFORM_VERSION, "serial": self.serial,
                "lineage": self.lineage, "outputs": {}, "resources": resources}

    def save(self) -> None:
        self.serial += 1
        doc = self._doc()
        if self.path is None:
            self._memory.clear()
            self._memory.update(doc)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    def _load(self) -> None:
        doc: dict[str, Any] = dict(self._memory)
        if self.path is not None:
            try:
                doc = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                doc = {}
        if not doc:
            return
        self.serial = int(doc.get("serial", 0))
        self.lineage = str(doc.get("lineage") or self.lineage)
        for res in doc.get("resources", []):
            for entry in res.get("instances", []):
                attrs = dict(entry.get("attributes") or {})
                address = str(res.get("address") or "")
                if not address:
                    continue
                self.instances[address] = Instance(address, str(res.get("rltui_kind") or ""),
                                                   str(attrs.get("name") or ""), attrs,
                                                   entry.get("status") == "tainted")
