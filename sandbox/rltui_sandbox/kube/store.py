"""KubeStore: the fake Kubernetes API's objects, resourceVersions, watches, logs and ports.

Single event loop: every method runs on the loop that serves the HTTP API, so no locks are
needed. Objects handed out are copies; stored objects are replaced, never mutated, so a
watch event keeps the state it announced.
"""

from __future__ import annotations

import copy
import random
import uuid
from collections import deque
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

from rltui_sandbox.kube import errors, kinds, patches, serviceaccounts, volumes
from rltui_sandbox.kube.disk import Disk
from rltui_sandbox.kube.errors import KubeError
from rltui_sandbox.kube.logs import LogBook
from rltui_sandbox.kube.resources import RESOURCES, ResourceType, resource
from rltui_sandbox.kube.selectors import SelectorError, field_matcher, label_matcher
from rltui_sandbox.kube.volumes import key_of as _key
from rltui_sandbox.kube.watch import WatchEvent, Watcher

if TYPE_CHECKING:
    from rltui_sandbox.faults import Faults

INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")
PATCH_TYPES = ("merge", "json", "strategic", "apply")
TERMINAL_PHASES = ("Succeeded", "Failed")
# Server-managed metadata a client cannot set on create.
_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                  "deletionGracePeriodSeconds", "generation", "managedFields", "selfLink")


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _spec_part(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class KubeStore:
    def __init__(self, root: Path | None = None, faults: Faults | None = None, history: int = 1000) -> None:
        self.root = Path(root) if root is not None else None
        self.faults = faults
        self._disk = Disk(self.root) if self.root is not None else None
        self._objects: dict[str, dict[tuple[str, str], dict]] = {r.plural: {} for r in RESOURCES}
        self._rv = 0
        self._serial = 0
        self._history: deque[WatchEvent] = deque(maxlen=history)
        self._watchers: set[Watcher] = set()
        self._ports: dict[tuple[str, str, int], tuple[str, int]] = {}
        self.closing = False
        # The key ServiceAccount tokens are signed with (serviceaccounts.py).
        self.sa_key = serviceaccounts.load_key(self.root)
        self._load()
        # Events at or below this resourceVersion are gone: a watch from there gets 410.
        self._history_start = self._rv
        self.logs = LogBook(self._disk)
        for ns in INITIAL_NAMESPACES:
            if ("", ns) not in self._objects["namespaces"]:
                self._create(resource("namespaces"), {"metadata": {"name": ns}}, None)

    # ----- persistence -------------------------------------------------------------------
    def _load(self) -> None:
        if self._disk is None:
            return
        meta = self._disk.load_meta()
        for rtype, obj in self._disk.load():
            self._objects[rtype.plural][_key(obj)] = obj
            self._rv = max(self._rv, int(obj["metadata"].get("resourceVersion", 0)))
        self._rv = max(self._rv, int(meta.get("resourceVersion", 0)))
        self._serial = int(meta.get("serial", 0))
        for ns, pod, port, host, target in self._disk.load_ports():
            self._ports[(ns, pod, port)] = (host, target)

    @property
    def resource_version(self) -> int:
        return self._rv

    # ----- the write path ----------------------------------------------------------------
    def _commit(self, rtype: ResourceType, kind: str, obj: dict, old: dict | None) -> dict:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        key = _key(obj)
        if kind == "DELETED":
            self._objects[rtype.plural].pop(key, None)
            if self._disk is not None:
                self._disk.remove(rtype, *key)
        else:
            self._objects[rtype.plural][key] = obj
            if self._disk is not None:
                self._disk.save(rtype, obj)
        if self._disk is not None:
            self._disk.save_meta({"resourceVersion": self._rv, "serial": self._serial})
        if len(self._history) == self._history.maxlen:
            self._history_start = self._history[0].rv
        event = WatchEvent(self._rv, kind, rtype, obj, old)
        self._history.append(event)
        for watcher in list(self._watchers):
            watcher.offer(event)
        return obj

    def _stored(self, rtype: ResourceType, namespace: str | None, name: str) -> dict:
        ns = (namespace or "default") if rtype.namespaced else ""
        obj = self._objects[rtype.plural].get((ns, name))
        if obj is None:
            raise errors.not_found(rtype, name)
        return obj

    def _write(self, rtype: ResourceType, old: dict, new: dict, dry_run: bool = False) -> dict:
        """Store an updated object: generation on spec change, nothing at all for a no-op."""
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return old
        if "generation" in old["metadata"] and _spec_part(new) != _spec_part(old):
            new["metadata"]["generation"] = old["metadata"]["generation"] + 1
        if dry_run:
            return new
        self._commit(rtype, "MODIFIED", new, old)
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(rtype, new, "Background")
        return new

    def _create(self, rtype: ResourceType, obj: Any, namespace: str | None, dry_run: bool = False) -> dict:
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
            raise errors.bad_request("the body of the request is not a Kubernetes object")
        obj = copy.deepcopy(obj)
        self._check_type(rtype, obj)
        meta = obj.setdefault("metadata", {})
        ns = self._namespace_for(rtype, meta, namespace)
        name = meta.get("name") or ""
        if rtype.plural == "pods":
            serviceaccounts.admit_pod(self, obj, ns)
        if not name:
            if not meta.get("generateName"):
                raise errors.invalid(rtype, "", "metadata.name", "FieldValueRequired",
                                     "Required value: name or generateName is required")
            suffix = "".join(random.choices("bcdfghjklmnpqrstvwxz2456789", k=5))
            name = meta["name"] = meta["generateName"] + suffix
        kinds.validate_name(rtype, name)
        if (ns, name) in self._objects[rtype.plural]:
            raise errors.already_exists(rtype, name)
        kinds.validate(rtype, obj)
        for field in _SERVER_FIELDS:
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now()
        if "spec" in obj:
            meta["generation"] = 1
        self._serial += 1
        kinds.defaults_on_create(rtype, obj, self._serial)
        if dry_run:
            return obj
        return self._commit(rtype, "ADDED", obj, None)

    def _check_type(self, rtype: ResourceType, obj: dict) -> None:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version and api_version != rtype.api_version:
            raise errors.bad_request(f"the API version in the data ({api_version}) does not match "
                                     f"the expected API version ({rtype.api_version})")
        if kind and kind != rtype.kind:
            raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected "
                                     f"kind ({rtype.kind})")
        obj["apiVersion"], obj["kind"] = rtype.api_version, rtype.kind

    def _namespace_for(self, rtype: ResourceType, meta: dict, namespace: str | None) -> str:
        if not rtype.namespaced:
            meta.pop("namespace", None)
            return ""
        body_ns = meta.get("namespace")
        if namespace and body_ns and body_ns != namespace:
            raise errors.bad_request("the namespace of the provided object does not match the "
                                     "namespace sent on the request")
        ns = meta["namespace"] = namespace or body_ns or "default"
        if ("", ns) not in self._objects["namespaces"]:
            raise errors.not_found(resource("namespaces"), ns)
        return ns

    def _update(self, rtype: ResourceType, namespace: str | None, name: str,
                mutate: Callable[[dict], Any], subresource: str | None, dry_run: bool) -> dict:
        old = self._stored(rtype, namespace, name)
        candidate = mutate(copy.deepcopy(old))
        if not isinstance(candidate, dict) or not isinstance(candidate.get("metadata"), dict):
            raise errors.bad_request("the body of the request is not a Kubernetes object")
        self._check_type(rtype, candidate)
        meta, old_meta = candidate["metadata"], old["metadata"]
        if meta.get("name", name) != name:
            raise errors.bad_request(f"the name of the object ({meta.get('name')}) does not match "
                                     f"the name on the URL ({name})")
        if rtype.namespaced and meta.get("namespace", old_meta["namespace"]) != old_meta["namespace"]:
            raise errors.bad_request("the namespace of the provided object does not match the "
                                     "namespace sent on the request")
        if meta.get("resourceVersion") not in (None, "", old_meta["resourceVersion"]):
            raise errors.conflict(rtype, name)
        if meta.get("uid") not in (None, "", old_meta["uid"]):
            raise errors.conflict(rtype, name)
        if subresource == "status":
            new = copy.deepcopy(old)
            if "status" in candidate:
                new["status"] = candidate["status"]
            else:
                new.pop("status", None)
        else:
            new = candidate
            meta.pop("managedFields", None)
            for field in ("uid", "creationTimestamp", "generation", "deletionTimestamp",
                          "deletionGracePeriodSeconds", "namespace", "name"):
                if field in old_meta:
                    meta[field] = old_meta[field]
                else:
                    meta.pop(field, None)
            if rtype.has_status:
                # The main resource ignores status changes: they go through /status.
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            kinds.defaults_on_update(rtype, old, new)
            kinds.validate(rtype, new)
            kinds.validate_update(rtype, old, new)
        return self._write(rtype, old, new, dry_run)

    # ----- deletion, garbage collection, finalizers --------------------------------------
    def _delete(self, rtype: ResourceType, obj: dict, propagation: str) -> dict:
        meta = obj["metadata"]
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return copy.deepcopy(obj)
            new = copy.deepcopy(obj)
            new["metadata"]["deletionTimestamp"] = now()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            return self._commit(rtype, "MODIFIED", new, obj)
        return self._remove(rtype, obj, propagation)

    def _dependents(self, uid: str) -> list[tuple[ResourceType, dict]]:
        out = []
        for rtype in RESOURCES:
            for obj in list(self._objects[rtype.plural].values()):
                refs = obj["metadata"].get("ownerReferences") or []
                if any(ref.get("uid") == uid for ref in refs):
                    out.append((rtype, obj))
        return out

    def _owner_alive(self, uid: str) -> bool:
        return any(o["metadata"]["uid"] == uid for objs in self._objects.values() for o in objs.values())

    def _remove(self, rtype: ResourceType, obj: dict, propagation: str) -> dict:
        uid = obj["metadata"]["uid"]
        if rtype.plural == "namespaces":
            self._empty_namespace(obj["metadata"]["name"])
        dependents = self._dependents(uid)
        if propagation == "Orphan":
            for dep_type, dep in dependents:
                new = copy.deepcopy(dep)
                new["metadata"]["ownerReferences"] = [
                    r for r in dep["metadata"]["ownerReferences"] if r.get("uid") != uid]
                self._write(dep_type, dep, new)
            dependents = []
        elif propagation == "Foreground":
            for dep_type, dep in dependents:
                if self._objects[dep_type.plural].get(_key(dep)) is dep:
                    self._delete(dep_type, dep, "Foreground")
            dependents = []
        gone = copy.deepcopy(obj)
        self._commit(rtype, "DELETED", gone, obj)
        self._on_removed(rtype, gone)
        for dep_type, dep in dependents:
            current = self._objects[dep_type.plural].get(_key(dep))
            if current is None:
                continue
            owners = [r.get("uid") for r in current["metadata"].get("ownerReferences") or []]
            if not any(o != uid and self._owner_alive(o) for o in owners):
                self._delete(dep_type, current, "Background")
        return copy.deepcopy(gone)

    def _empty_namespace(self, ns: str) -> None:
        for rtype in RESOURCES:
            if rtype.namespaced:
                for key, obj in list(self._objects[rtype.plural].items()):
                    if key[0] == ns and self._objects[rtype.plural].get(key) is obj:
                        self._remove(rtype, obj, "Background")

    def _on_removed(self, rtype: ResourceType, obj: dict) -> None:
        ns, name = _key(obj)
        if rtype.plural == "pods":
            self.logs.drop(ns, name)
            for key in [k for k in self._ports if k[:2] == (ns, name)]:
                del self._ports[key]
            self._save_ports()
        elif rtype.plural == "persistentvolumeclaims":
            volumes.release_volume(self, obj)
        elif rtype.plural == "persistentvolumes":
            volumes.lose_claim(self, obj)

    def _after(self, rtype: ResourceType) -> None:
        if rtype.plural in ("persistentvolumes", "persistentvolumeclaims"):
            volumes.bind_volumes(self)

    # ----- public async API (the HTTP layer and the toy KubeRay controller use these) ----
    async def create(self, plural_key: str, obj: dict, namespace: str | None = None, *,
                     dry_run: bool = False) -> dict:
        """Create like POST: 201-style result; status is reset as the real strategies do."""
        rtype = resource(plural_key)
        created = copy.deepcopy(self._create(rtype, obj, namespace, dry_run))
        if not dry_run:
            self._after(rtype)  # e.g. binding a PVC: later MODIFIED events, as in a real cluster
        return created

    async def get(self, plural_key: str, name: str, namespace: str | None = None) -> dict:
        rtype = resource(plural_key)
        return copy.deepcopy(self._stored(rtype, namespace, name))

    def peek(self, plural_key: str, name: str, namespace: str | None = None) -> dict:
        """The stored object itself, not a copy, for a read-only hot path: the kubelet's probe
        loop reads its pod before every probe (hundreds a second at speed 300), and copying it
        each time was the daemon's largest cost at rest. The caller must not change it."""
        return self._stored(resource(plural_key), namespace, name)

    def _select(self, rtype: ResourceType, namespace: str | None, label_selector: str | None,
                field_selector: str | None) -> Callable[[dict], bool]:
        allowed = {"metadata.name", "metadata.namespace", *rtype.fields}
        try:
            labels, fields = label_matcher(label_selector), field_matcher(field_selector, allowed)
        except SelectorError as exc:
            raise errors.bad_request(str(exc)) from None

        def match(obj: dict) -> bool:
            if namespace and obj["metadata"].get("namespace") != namespace:
                return False
            return labels(obj) and fields(obj)
        return match

    def list_sync(self, plural_key: str, namespace: str | None = None, label_selector: str | None = None,
                  field_selector: str | None = None) -> list[dict]:
        """Matching objects sorted by namespace and name, NOT copied (read-only)."""
        rtype = resource(plural_key)
        match = self._select(rtype, namespace, label_selector, field_selector)
        objs = self._objects[rtype.plural]
        return [objs[k] for k in sorted(objs) if match(objs[k])]

    async def list(self, plural_key: str, namespace: str | None = None, label_selector: str | None = None,
                   field_selector: str | None = None) -> list[dict]:
        """Matching objects (copies); namespace None means all namespaces."""
        return copy.deepcopy(self.list_sync(plural_key, namespace, label_selector, field_selector))

    async def replace(self, plural_key: str, obj: dict, namespace: str | None = None, *,
                      subresource: str | None = None, dry_run: bool = False) -> dict:
        """PUT: the whole object (or its status with subresource="status")."""
        rtype = resource(plural_key)
        name = (obj.get("metadata") or {}).get("name") if isinstance(obj, dict) else None
        if not name:
            raise errors.invalid(rtype, "", "metadata.name", "FieldValueRequired", "Required value")
        body = copy.deepcopy(obj)
        result = self._update(rtype, namespace, name, lambda _old: body, subresource, dry_run)
        if not dry_run:
            self._after(rtype)
        return copy.deepcopy(result)

    async def patch(self, plural_key: str, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None, dry_run: bool = False) -> dict:
        """PATCH with patch_type merge | json | strategic | apply (server-side apply, approximated)."""
        rtype = resource(plural_key)
        if patch_type not in PATCH_TYPES:
            raise ValueError(f"unknown patch type {patch_type!r}")
        if patch_type == "strategic" and rtype.custom:
            raise KubeError(415, "UnsupportedMediaType",
                            "the body of the request was in an unknown format - accepted media types "
                            "include: application/json-patch+json, application/merge-patch+json, "
                            "application/apply-patch+yaml")
        if patch_type == "apply" and self._objects[rtype.plural].get(
                ((namespace or "default") if rtype.namespaced else "", name)) is None:
            return await self.create(plural_key, patch, namespace, dry_run=dry_run)

        def mutate(current: dict) -> Any:
            try:
                if patch_type == "json":
                    return patches.json_patch(current, patch)
                if not isinstance(patch, dict):
                    raise patches.PatchError("a merge patch must be a JSON object")
                if patch_type == "merge" or rtype.custom:
                    return patches.merge_patch(current, patch)
                return patches.strategic_merge(current, patch)
            except patches.PatchError as exc:
                raise KubeError(422, "Invalid", f"the server rejected our request due to an error in "
                                f"our request: {exc}", {}) from None
        result = self._update(rtype, namespace, name, mutate, subresource, dry_run)
        if not dry_run:
            self._after(rtype)
        return copy.deepcopy(result)

    async def patch_status(self, plural_key: str, name: str, status: dict,
                           namespace: str | None = None) -> dict:
        """Merge `status` into the object's status (the controller's way to move phases)."""
        return await self.patch(plural_key, name, {"status": status}, namespace, subresource="status")

    async def delete(self, plural_key: str, name: str, namespace: str | None = None, *,
                     propagation: str = "Background", preconditions: dict | None = None,
                     dry_run: bool = False) -> dict:
        """Delete now (pods too: grace period 0), cascading to owned objects per `propagation`."""
        rtype = resource(plural_key)
        if propagation not in ("Background", "Foreground", "Orphan"):
            raise errors.bad_request(f"propagationPolicy: Unsupported value: \"{propagation}\"")
        obj = self._stored(rtype, namespace, name)
        if rtype.plural == "namespaces" and name in PROTECTED_NAMESPACES:
            raise KubeError(403, "Forbidden", f'namespaces "{name}" is forbidden: this namespace may '
                            "not be deleted", {"name": name, "kind": "namespaces"})
        pre = preconditions or {}
        if pre.get("uid") not in (None, obj["metadata"]["uid"]) or \
                pre.get("resourceVersion") not in (None, obj["metadata"]["resourceVersion"]):
            raise errors.conflict(rtype, name)
        if dry_run:
            return copy.deepcopy(obj)
        result = self._delete(rtype, obj, propagation)
        self._after(rtype)
        return copy.deepcopy(result)

    def watch(self, plural_key: str, namespace: str | None = None, resource_version: str | int | None = None,
              label_selector: str | None = None, field_selector: str | None = None) -> Watcher:
        """Events after `resource_version`; the current objects as ADDED when it is None or "0"."""
        rtype = resource(plural_key)
        match = self._select(rtype, None, label_selector, field_selector)
        watcher = Watcher(self, rtype, namespace, match)
        if resource_version in (None, "", "0", 0):
            for obj in self.list_sync(plural_key, namespace, label_selector, field_selector):
                watcher._queue.put_nowait(("ADDED", obj))
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise errors.bad_request(f'resourceVersion: Invalid value: "{resource_version}"') from None
            if since < self._history_start:
                raise errors.expired(since, self._history_start + 1)
            for event in self._history:
                if event.rv > since:
                    watcher.offer(event)
        self._watchers.add(watcher)
        return watcher

    # ----- pod logs ----------------------------------------------------------------------
    def _container(self, namespace: str, pod: str, container: str | None) -> tuple[dict, str]:
        obj = self._stored(resource("pods"), namespace, pod)
        names = [c.get("name") for c in (obj.get("spec") or {}).get("containers") or []]
        if container is None:
            default = (obj["metadata"].get("annotations") or {}).get("kubectl.kubernetes.io/default-container")
            container = default if default in names else names[0] if names else ""
        elif container not in names:
            raise errors.bad_request(f"container {container} is not valid for pod {pod}")
        return obj, container

    async def append_log(self, namespace: str, pod: str, text: str, container: str | None = None) -> None:
        """Append container output (a controller's or a real process's); keeps the newest 4 MiB."""
        _, name = self._container(namespace, pod, container)
        self.logs.append((namespace, pod, name), text)

    def _check_started(self, obj: dict, container: str) -> None:
        if (obj.get("status") or {}).get("phase", "Pending") != "Pending":
            return
        reason = "ContainerCreating"
        for status in (obj.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") == container:
                reason = ((status.get("state") or {}).get("waiting") or {}).get("reason", reason)
        raise errors.bad_request(f'container "{container}" in pod "{obj["metadata"]["name"]}" is '
                                 f"waiting to start: {reason}")

    async def read_log(self, namespace: str, pod: str, container: str | None = None,
                       tail_lines: int | None = None) -> str:
        obj, name = self._container(namespace, pod, container)
        if not self.logs.written((namespace, pod, name)):
            self._check_started(obj, name)
        return self.logs.read((namespace, pod, name), tail_lines)

    async def follow_log(self, namespace: str, pod: str, container: str | None = None,
                         tail_lines: int | None = None, tick: float = 1.0) -> AsyncIterator[str]:
        """Existing text, then new text as it comes; "" on idle ticks; ends with the pod."""
        obj, name = self._container(namespace, pod, container)
        key = (namespace, pod, name)
        if not self.logs.written(key):
            self._check_started(obj, name)
        offset = self.logs.written(key)
        yield self.logs.read(key, tail_lines)
        while True:
            text, offset = self.logs.since(key, offset)
            if text:
                yield text
            current = self._objects["pods"].get((namespace, pod))
            if self.closing or current is None or current["metadata"]["uid"] != obj["metadata"]["uid"] \
                    or (current.get("status") or {}).get("phase") in TERMINAL_PHASES:
                text, offset = self.logs.since(key, offset)
                if text:
                    yield text
                return
            await self.logs.wait(namespace, pod, tick)
            yield ""

    # ----- port-forward targets ----------------------------------------------------------
    def _save_ports(self) -> None:
        if self._disk is not None:
            self._disk.save_ports([[*k, *v] for k, v in sorted(self._ports.items())])

    async def set_port_target(self, namespace: str, pod: str, port: int, host: str, target_port: int) -> None:
        """Where `port` of `pod` really listens (e.g. the local Ray head's dashboard)."""
        self._stored(resource("pods"), namespace, pod)
        self._ports[(namespace, pod, int(port))] = (host, int(target_port))
        self._save_ports()

    def port_target(self, namespace: str, pod: str, port: int) -> tuple[str, int] | None:
        return self._ports.get((namespace, pod, int(port)))

    async def resolve_service(self, namespace: str, service: str, port: int) -> tuple[str, int]:
        """(pod, container port) behind `service:port`, as `kubectl port-forward service/...` picks."""
        svc = self._stored(resource("services"), namespace, service)
        spec = svc.get("spec") or {}
        selector = spec.get("selector") or {}
        svc_port = next((p for p in spec.get("ports") or [] if p.get("port") == int(port)), None)
        if not selector or svc_port is None:
            raise errors.bad_request(f"service {service} does not have a service port {port}")
        sel = ",".join(f"{k}={v}" for k, v in selector.items())
        pods = [p for p in self.list_sync("pods", namespace, sel)
                if (p.get("status") or {}).get("phase") == "Running"]
        if not pods:
            raise errors.not_found(resource("pods"), f"for service {service}")
        pod = pods[0]
        target = svc_port.get("targetPort", port)
        if isinstance(target, str):
            target = next((cp["containerPort"] for c in pod["spec"].get("containers", [])
                           for cp in c.get("ports") or [] if cp.get("name") == target), None)
            if target is None:
                raise errors.bad_request(f"pod {pod['metadata']['name']} has no port named "
                                         f"{svc_port.get('targetPort')}")
        return pod["metadata"]["name"], int(target)

    def close(self) -> None:
        """End every watch and log follow (server shutdown)."""
        self.closing = True
        for watcher in list(self._watchers):
            watcher.close()
