"""Kubernetes over the official asyncio client (`kubernetes.aio`).

apply/get/list/delete return plain dicts (the JSON the API server sent, as kubectl shows it);
watches resume from the last resourceVersion after a cut and relist after 410 Gone; RayCluster
readiness is read from replica counts and the HeadPodReady condition, or from its pods where
KubeRay writes no such condition, never from `state` (rayhealth.py).
Secrets: neither an object nor its data ever goes into an exception or a log line.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import contextlib
import json
import logging
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

from .endpoints import CALL_TIMEOUT_S, Endpoints
from .errors import CloudError, classify, retry
from .imports import kube_api_exception, kube_client
from .rayhealth import RayClusterHealth as RayClusterHealth  # re-exported: callers read health here
from .rayhealth import raycluster_health as raycluster_health
from .rayhealth import wait_ready

log = logging.getLogger(__name__)

T = TypeVar("T")
# A Kubernetes object as the API server sends it (JSON): what apply/get/list/watch deal in.
Obj = dict[str, Any]

# A watch asks the server to end it after this long and then resumes: a silently dead
# connection is noticed within this window plus the client's margin.
WATCH_WINDOW_S = 240


@dataclass(frozen=True)
class Kind:
    plural: str
    kind: str
    namespaced: bool = True
    group: str = ""         # the API group; "" is the core group (/api/v1)
    version: str = "v1"

    def path(self, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
        """The REST path, as the API concepts page lays it out ("Resource URIs"): the same form
        for built-in and custom resources, so no generated API class is needed to reach one."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
        return base + (f"/{sub}" if sub else "")


KINDS = {k.plural: k for k in (
    Kind("pods", "Pod"),
    Kind("services", "Service"),
    Kind("secrets", "Secret"),
    Kind("persistentvolumes", "PersistentVolume", namespaced=False),
    Kind("persistentvolumeclaims", "PersistentVolumeClaim"),
    Kind("events", "Event"),
    Kind("nodes", "Node", namespaced=False),
    Kind("csinodes", "CSINode", namespaced=False, group="storage.k8s.io"),
    Kind("rayclusters", "RayCluster", group="ray.io"),
    # The job supervisor's objects (manifests_supervisor.py).
    Kind("configmaps", "ConfigMap"),
    Kind("serviceaccounts", "ServiceAccount"),
    Kind("deployments", "Deployment", group="apps"),
    Kind("roles", "Role", group="rbac.authorization.k8s.io"),
    Kind("rolebindings", "RoleBinding", group="rbac.authorization.k8s.io"),
    # The budget guard's read of the GPU nodes (manifests_supervisor.guard_rbac).
    Kind("clusterroles", "ClusterRole", namespaced=False, group="rbac.authorization.k8s.io"),
    Kind("clusterrolebindings", "ClusterRoleBinding", namespaced=False, group="rbac.authorization.k8s.io"),
)}
BY_KIND = {k.kind: k for k in KINDS.values()}


@dataclass(frozen=True)
class KubeEvent:
    """ADDED / MODIFIED / DELETED with the object, or SYNCED (obj {}) once the current state
    has been delivered (after the first list and after every relist)."""
    type: str
    obj: Obj


def kind_of(name: str) -> Kind:
    found = KINDS.get(name) or BY_KIND.get(name)
    if found is None:
        raise ValueError(f"unknown kind {name!r}; known: {', '.join(KINDS)}")
    return found


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")


def _redact(kind: Kind, obj: Obj) -> Obj:
    """A Secret as returned to callers: keys kept, values never."""
    if kind.plural != "secrets":
        return obj
    obj = dict(obj)
    obj.pop("stringData", None)
    if isinstance(obj.get("data"), dict):
        obj["data"] = {k: "<redacted>" if v else "" for k, v in obj["data"].items()}
    return obj


def _backoff(attempt: int, base_s: float, cap_s: float = 10.0) -> float:
    return random.uniform(0, min(cap_s, base_s * 2 ** attempt))


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, Any]:
    """The list/watch query parameters that are set, by their names in the API."""
    return {key: v for key, v in (("labelSelector", label_selector),
                                  ("fieldSelector", field_selector)) if v}


class KubeAdapter:
    def __init__(self, endpoints: Endpoints, *, cluster: Any = None, namespace: str = "default",
                 backoff_s: float = 0.5) -> None:
        self.endpoints, self.cluster, self.namespace = endpoints, cluster, namespace
        self.backoff_s = backoff_s
        self.api: Any = None   # kubernetes.aio.client.ApiClient once connected
        self._informers: dict[tuple[str, str], _Informer] = {}

    # ----- connection -------------------------------------------------------------------
    async def connect(self, creds: Any = None) -> None:
        """From the GKE cluster's endpoint and CA and a bearer token from the Endpoints'
        credentials (`creds`, or loaded here): the same code for Google and the sandbox (whose World
        gives its clusters its own HTTPS address and CA, and whose ADC file refreshes at its
        token endpoint)."""
        client = kube_client()

        if self.cluster is None:
            raise CloudError("no GKE cluster to connect to: is it created?", transient=False,
                             code="NotFound")
        if creds is None:
            creds = await asyncio.to_thread(self.endpoints.credentials)
        self.api = client.ApiClient(configuration=await gke_configuration(self.cluster, creds))

    @property
    def configuration(self) -> Any:
        if self.api is None:
            raise RuntimeError("KubeAdapter.connect() first")
        return self.api.configuration

    async def close(self) -> None:
        for informer in self._informers.values():
            informer.task.cancel()
        await asyncio.gather(*(i.task for i in self._informers.values()), return_exceptions=True)
        self._informers.clear()
        if self.api is not None:
            await self.api.close()
            self.api = None

    # ----- one request ------------------------------------------------------------------
    async def _send(self, method: str, kind: Kind, namespace: str | None, name: str | None = None,
                    *, sub: str | None = None, query: dict[str, Any] | None = None,
                    body: Any = None, content_type: str | None = None,
                    timeout_s: float | None = CALL_TIMEOUT_S) -> Any:
        """One request through the client's ApiClient (its auth hook, TLS and aiohttp session),
        by REST path rather than a generated API class: CoreV1Api alone is a 1.4 s import of
        pydantic models this adapter never uses, as it reads the JSON itself. Returns the
        aiohttp response, unread (the generated `*_without_preload_content` methods' answer)."""
        if self.api is None:
            raise RuntimeError("KubeAdapter.connect() first")
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        request = await self.api.param_serialize(
            method=method, resource_path=kind.path(namespace or self.namespace, name, sub),
            query_params=params, header_params=headers, body=body, auth_settings=["BearerToken"])
        answer = await self.api.call_api(*request, _preload_content=False,
                                         _request_timeout=timeout_s)
        return answer.response

    async def _call(self, method: str, kind: Kind, namespace: str | None = None,
                    name: str | None = None, **kwargs: Any) -> Obj:
        """One request; a non-2xx answer becomes ApiException(status, reason) for `classify`."""
        ApiException = kube_api_exception()

        resp = await self._send(method, kind, namespace, name, **kwargs)
        try:
            raw = await resp.read()
        finally:
            resp.release()
        if 200 <= resp.status < 300:
            obj: Obj = json.loads(raw) if raw.strip() else {}
            return obj
        reason = resp.reason or ""
        try:
            status = json.loads(raw)
            # A Secret's Status message may quote the request: keep only its reason then.
            reason = (status.get("reason") or reason) if kind.plural == "secrets" \
                else (status.get("message") or reason)
        except ValueError:
            pass
        exc = ApiException(status=resp.status, reason=reason)
        if resp.status == 429 and resp.headers.get("Retry-After", "").isdigit():
            await asyncio.sleep(min(float(resp.headers["Retry-After"]), 10.0))
        raise exc

    async def _retry(self, what: str, call: Callable[[], Awaitable[T]], secret: bool = False) -> T:
        try:
            return await retry(call, what=what, base_s=self.backoff_s, timeout_s=CALL_TIMEOUT_S + 5)
        except CloudError as err:
            if secret:
                raise CloudError(err.message, transient=err.transient, code=err.code) from None
            raise

    # ----- objects ----------------------------------------------------------------------
    async def apply(self, obj: Obj) -> Obj:
        """Create; if it exists, merge-patch it to the manifest (a re-run changes nothing)."""
        kind = kind_of(obj.get("kind", ""))
        meta = obj.get("metadata") or {}
        name, ns = meta.get("name", ""), meta.get("namespace")
        what = f"apply {kind.kind} {name}"

        async def call() -> Obj:
            ApiException = kube_api_exception()
            try:
                return await self._call("POST", kind, ns, body=obj)
            except ApiException as exc:
                if exc.status != 409:
                    raise
            return await self._call("PATCH", kind, ns, name, body=obj,
                                    content_type="application/merge-patch+json")

        result = await self._retry(what, call, secret=kind.plural == "secrets")
        log.info("applied %s %s (resourceVersion %s)", kind.kind, name,
                 (result.get("metadata") or {}).get("resourceVersion"))
        return _redact(kind, result)

    async def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        k = kind_of(kind)

        async def call() -> Obj | None:
            ApiException = kube_api_exception()
            try:
                return await self._call("GET", k, namespace, name)
            except ApiException as exc:
                if exc.status == 404:
                    return None
                raise

        found = await self._retry(f"get {k.kind} {name}", call, secret=k.plural == "secrets")
        return None if found is None else _redact(k, found)

    async def _list_raw(self, k: Kind, label_selector: str | None, field_selector: str | None,
                        namespace: str | None = None) -> Obj:
        query = _selectors(label_selector, field_selector)
        return await self._retry(f"list {k.plural}",
                                 lambda: self._call("GET", k, namespace, query=query),
                                 secret=k.plural == "secrets")

    async def list(self, kind: str, label_selector: str | None = None, *,
                   field_selector: str | None = None) -> builtins.list[Obj]:
        k = kind_of(kind)
        listing = await self._list_raw(k, label_selector, field_selector)
        return [_redact(k, item) for item in listing.get("items") or []]

    async def pods_everywhere(self, field_selector: str | None = None) -> builtins.list[Obj]:
        """Pods of every namespace (GET /api/v1/pods: CoreV1Api.list_pod_for_all_namespaces),
        e.g. those bound to one node (field_selector spec.nodeName=<node>)."""
        k = Kind("pods", "Pod", namespaced=False)
        listing = await self._list_raw(k, None, field_selector)
        return [_redact(k, item) for item in listing.get("items") or []]

    async def cached_list(self, kind: str, label_selector: str | None = None) -> builtins.list[Obj]:
        """What `list(kind, label_selector)` answers, read from a watch this adapter keeps open
        until close() (a shared informer's store, as client-go's listers read one): the first
        call lists and starts watching, later ones send no request. A watch that gave up
        (watch()'s give_up_s) is started again by the next call."""
        key = (kind, label_selector or "")
        informer = self._informers.get(key)
        if informer is None or informer.task.done():
            informer = self._informers[key] = _Informer(self.watch(kind, label_selector=label_selector))
        waiter = asyncio.ensure_future(informer.synced.wait())
        try:
            await asyncio.wait([informer.task, waiter], return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if not informer.synced.is_set():
            informer.task.result()  # raises what ended the watch
        return builtins.list(informer.objects.values())

    async def delete(self, kind: str, name: str, *, wait: bool = True, timeout_s: float = 300.0,
                     namespace: str | None = None) -> None:
        """Delete (already gone is fine); with `wait`, return once it no longer exists."""
        k = kind_of(kind)

        async def call() -> None:
            ApiException = kube_api_exception()
            try:
                await self._call("DELETE", k, namespace, name,
                                 query={"propagationPolicy": "Background"})
            except ApiException as exc:
                if exc.status != 404:
                    raise

        await self._retry(f"delete {k.kind} {name}", call, secret=k.plural == "secrets")
        if not wait:
            return
        try:
            async with asyncio.timeout(timeout_s), contextlib.aclosing(self.watch(
                    k.plural, field_selector=f"metadata.name={name}", namespace=namespace)) as events:
                async for event in events:
                    if event.type == "DELETED" or event == KubeEvent("SYNCED", {"count": 0}):
                        return
        except TimeoutError:
            raise CloudError(f"{k.kind} {name} still exists {timeout_s:.0f} s after delete"
                             " (a finalizer may be holding it)", transient=True,
                             code="Timeout") from None

    async def events(self, involved_name: str | None = None) -> builtins.list[Obj]:
        """Events (optionally of one object), oldest first."""
        selector = f"involvedObject.name={involved_name}" if involved_name else None
        items = await self.list("events", field_selector=selector)

        def when(ev: Obj) -> str:
            stamp: str = ev.get("lastTimestamp") or ev.get("eventTime") or \
                (ev.get("metadata") or {}).get("creationTimestamp") or ""
            return stamp
        return sorted(items, key=when)

    # ----- a pod's container log ----------------------------------------------------------
    async def pod_log(self, name: str, *, follow: bool = False, tail_lines: int | None = 500,
                      container: str | None = None, namespace: str | None = None
                      ) -> AsyncGenerator[str, None]:
        """The container log (`read_namespaced_pod_log`, GET pods/NAME/log): the last
        `tail_lines` lines, then, with `follow`, new text as the kubelet sends it until the
        container ends or the caller stops iterating. A pod not started yet answers 400 with
        the waiting reason, a missing one 404: both become a CloudError with the API's words
        (the Kubernetes API reference, "Read log of the specified Pod")."""
        ApiException = kube_api_exception()

        query = {"container": container, "tailLines": tail_lines, "follow": follow or None}
        what = f"log of pod {name}"
        try:
            resp = await self._send("GET", kind_of("pods"), namespace, name, sub="log",
                                    query=query, timeout_s=None if follow else CALL_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - sorted by classify
            raise classify(exc, what) from exc
        try:
            if resp.status != 200:
                raw = await resp.read()
                try:
                    reason = json.loads(raw).get("message") or resp.reason or ""
                except ValueError:
                    reason = resp.reason or ""
                raise classify(ApiException(status=resp.status, reason=reason), what)
            while True:
                try:
                    chunk = await resp.content.readany()
                except Exception as exc:  # noqa: BLE001 - a cut connection
                    raise classify(exc, what) from exc
                if not chunk:
                    return
                yield chunk.decode(errors="replace")
        finally:
            resp.release()

    # ----- watches ----------------------------------------------------------------------
    async def watch(self, kind: str, *, label_selector: str | None = None,
                    field_selector: str | None = None, namespace: str | None = None,
                    window_s: int = WATCH_WINDOW_S, give_up_s: float = 300.0
                    ) -> AsyncGenerator[KubeEvent, None]:
        """The current objects as ADDED, SYNCED, then changes, for as long as the caller iterates.

        A cut or ended stream resumes from the last resourceVersion seen (bookmarks included);
        410 Gone relists and emits only the difference, as the API concepts page asks of
        clients ("recognizing the status code 410 Gone, clearing their local cache, performing
        a new get or list operation, and starting the watch from the resourceVersion that was
        returned") and client-go's Reflector does (tools/cache/reflector.go: an expired watch
        ends the ListAndWatch, setIsLastSyncResourceVersionUnavailable, and the next one lists).
        Nothing else lists again. Transient failures back off with jitter; after `give_up_s` of
        nothing but failures the last one is raised.
        """
        k = kind_of(kind)
        known: dict[tuple[str, str], Obj] = {}
        rv: str | None = None
        failing_since: float | None = None
        attempt = 0
        while True:
            try:
                if rv is None:
                    listing = await self._list_raw(k, label_selector, field_selector, namespace)
                    rv = (listing.get("metadata") or {}).get("resourceVersion") or "0"
                    current = {_key(o): o for o in listing.get("items") or []}
                    for missed in _difference(known, current):
                        yield KubeEvent(missed.type, _redact(k, missed.obj))
                    known = current
                    yield KubeEvent("SYNCED", {"count": len(known)})
                opened, lines = time.monotonic(), 0
                async with contextlib.aclosing(self._stream(
                        k, rv, label_selector, field_selector, namespace, window_s)) as stream:
                    async for event, new_rv in stream:
                        rv, lines = new_rv, lines + 1
                        failing_since, attempt = None, 0
                        if event is None:
                            continue  # a bookmark
                        if event.type == "DELETED":
                            known.pop(_key(event.obj), None)
                        else:
                            known[_key(event.obj)] = event.obj
                        yield KubeEvent(event.type, _redact(k, event.obj))
                if not lines and time.monotonic() - opened < 1.0:
                    # Ended at once with nothing in it (a proxy?): do not spin on it.
                    await asyncio.sleep(_backoff(attempt, self.backoff_s))
                    attempt += 1
            except _Gone:
                log.info("watch %s: resourceVersion %s is gone; relisting", k.plural, rv)
                rv = None
            except CloudError as err:
                failing_since = failing_since or time.monotonic()
                if not err.transient or time.monotonic() - failing_since > give_up_s:
                    raise
                log.info("watch %s: %s; resuming from %s", k.plural, err.message, rv)
                await asyncio.sleep(_backoff(attempt, self.backoff_s))
                attempt += 1

    async def _stream(self, k: Kind, rv: str, label_selector: str | None,
                      field_selector: str | None, namespace: str | None,
                      window_s: int) -> AsyncGenerator[tuple[KubeEvent | None, str], None]:
        """One watch request: (event or None for a bookmark, its resourceVersion) per line."""
        ApiException = kube_api_exception()

        query = _selectors(label_selector, field_selector)
        query.update(watch=True, resourceVersion=rv, allowWatchBookmarks=True,
                     timeoutSeconds=window_s)
        try:
            resp = await self._send("GET", k, namespace, query=query, timeout_s=window_s + 30)
        except Exception as exc:  # noqa: BLE001 - sorted by classify
            raise classify(exc, f"watch {k.plural}") from exc
        try:
            if resp.status == 410:
                raise _Gone
            if resp.status != 200:
                raise classify(ApiException(status=resp.status, reason=resp.reason or ""),
                               f"watch {k.plural}")
            while True:
                try:
                    line = await resp.content.readline()
                except Exception as exc:  # noqa: BLE001 - a cut connection
                    raise classify(exc, f"watch {k.plural}") from exc
                if not line.endswith(b"\n"):
                    return  # the window ended, or the stream was cut (mid-line): resume
                if not line.strip():
                    continue
                data = json.loads(line)
                obj = data.get("object") or {}
                if data.get("type") == "ERROR":
                    if obj.get("code") == 410:
                        raise _Gone
                    raise classify(ApiException(status=obj.get("code"), reason=obj.get("message", "")),
                                   f"watch {k.plural}")
                new_rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                if data.get("type") == "BOOKMARK":
                    yield None, new_rv
                else:
                    yield KubeEvent(data["type"], obj), new_rv
        finally:
            resp.release()

    # ----- RayCluster -------------------------------------------------------------------
    async def wait_raycluster_ready(self, name: str,
                                    on_update: Callable[[RayClusterHealth], Any] | None = None,
                                    timeout_s: float = 1800.0) -> Obj:
        """Wait until every worker and the head are ready; `on_update` on every change. Read from
        the RayCluster, and from its pods where it has no HeadPodReady condition (rayhealth.py)."""
        return await wait_ready(self, name, on_update, timeout_s)


class _Informer:
    """The objects one watch holds (KubeAdapter.cached_list), kept current by its own task."""

    def __init__(self, events: AsyncGenerator[KubeEvent, None]) -> None:
        self.objects: dict[tuple[str, str], Obj] = {}
        self.synced = asyncio.Event()
        self.task = asyncio.create_task(self._run(events))
        # Its error is raised by the next cached_list that finds it not synced, else dropped.
        self.task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _run(self, events: AsyncGenerator[KubeEvent, None]) -> None:
        async with contextlib.aclosing(events):
            async for event in events:
                if event.type == "SYNCED":
                    self.synced.set()
                elif event.type == "DELETED":
                    self.objects.pop(_key(event.obj), None)
                else:
                    self.objects[_key(event.obj)] = event.obj


class _Gone(Exception):
    """410: the resourceVersion is no longer in the server's history."""


def _difference(known: dict[tuple[str, str], Obj],
                current: dict[tuple[str, str], Obj]) -> list[KubeEvent]:
    """What a watcher missed between two lists, as the events it would have seen."""
    out = [KubeEvent("DELETED", obj) for key, obj in known.items() if key not in current]
    for key, obj in current.items():
        old = known.get(key)
        if old is None:
            out.append(KubeEvent("ADDED", obj))
        elif (old.get("metadata") or {}).get("resourceVersion") != \
                (obj.get("metadata") or {}).get("resourceVersion"):
            out.append(KubeEvent("MODIFIED", obj))
    return out


# ----- GKE: endpoint, CA and an ADC token (no kubeconfig) ---------------------------------

async def gke_configuration(cluster: Any, creds: Any) -> Any:
    """A client Configuration for a GKE cluster (its `endpoint` and base64 PEM
    `master_auth.cluster_ca_certificate`) with a bearer token from google-auth `creds`,
    refreshed before it expires (the hook runs before every request and port-forward)."""
    from google.auth.transport.requests import Request
    Configuration = kube_client().Configuration

    if not cluster.endpoint or not cluster.master_auth.cluster_ca_certificate:
        raise CloudError("the GKE cluster has no endpoint or CA yet: is it still provisioning?",
                         transient=True, code="NotReady")
    lock = asyncio.Lock()

    async def refresh(cfg: Any) -> None:
        # google-auth's `expired` already counts a few minutes of headroom before expiry.
        async with lock:
            if not creds.valid or creds.expired:
                await asyncio.to_thread(creds.refresh, Request())
            cfg.api_key["BearerToken"] = creds.token

    cfg = Configuration(host=f"https://{cluster.endpoint}")
    cfg.ca_cert_data = base64.b64decode(cluster.master_auth.cluster_ca_certificate).decode()
    cfg.api_key_prefix["BearerToken"] = "Bearer"
    # The generated Configuration declares the hook only as `self.refresh_api_key_hook = None`.
    cfg.refresh_api_key_hook = refresh
    await refresh(cfg)
    return cfg
