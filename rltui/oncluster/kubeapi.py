"""The Kubernetes API as the on-cluster supervisor calls it: an in-cluster client (the pod's
ServiceAccount token and CA, as client-go's rest.InClusterConfig reads them) and a pod watch kept
as client-go's reflector keeps one. The standard library only: it runs on the Ray image's Python
(3.9 or newer), beside supervisor.py in the supervisor's ConfigMap.
"""

from __future__ import annotations

import http.client
import json
import logging
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

log = logging.getLogger("rltui-supervisor")

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
STATE_KEY = "state.json"
CLUSTER_LABEL = "ray.io/cluster"

class Trouble(Exception):
    """Something did not answer as it should this time (network, 5xx): look again next poll."""


def fetch_json(req: urllib.request.Request, what: str, tls: ssl.SSLContext | None = None) -> dict[str, Any] | None:
    """The answer's JSON object, None for a 404 (absent, as the API says it), else Trouble."""
    try:
        with urllib.request.urlopen(req, context=tls, timeout=30) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise Trouble(f"{what}: HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:
        raise Trouble(f"{what}: {exc}") from None
    try:
        return dict(json.loads(raw)) if raw.strip() else {}
    except ValueError as exc:
        raise Trouble(f"{what}: not JSON ({exc})") from None


# ---- the Kubernetes API, as an in-cluster client -------------------------------------------------


class Kube:
    def __init__(self, env: dict[str, str]) -> None:
        self.sa_dir = Path(env.get("RLTUI_SERVICE_ACCOUNT_DIR") or SA_DIR)
        host = env.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
        host = f"[{host}]" if ":" in host else host  # an IPv6 address (client-go does the same)
        self.base = f"https://{host}:{env.get('KUBERNETES_SERVICE_PORT', '443')}"
        self.ns = env.get("POD_NAMESPACE") or self._file("namespace", "default")
        self.tls = ssl.create_default_context(cafile=str(self.sa_dir / "ca.crt"))
        self.pod_watch: PodWatch | None = None

    def _file(self, name: str, default: str) -> str:
        try:
            return (self.sa_dir / name).read_text().strip() or default
        except OSError:
            return default

    def _request(self, method: str, path: str, body: Any = None,
                 content_type: str = "application/json") -> urllib.request.Request:
        """The token is read per request: kubelet rotates it."""
        headers = {"Authorization": f"Bearer {self._file('token', '')}", "Accept": "application/json"}
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), content_type
        return urllib.request.Request(self.base + path, data=data, method=method, headers=headers)

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json") -> dict[str, Any] | None:
        """The object, or None for 404."""
        return fetch_json(self._request(method, path, body, content_type), f"{method} {path}", self.tls)

    def stream(self, path: str, timeout: float) -> Any:
        """An open streaming GET (a watch), read line by line; `timeout` bounds each read."""
        try:
            return urllib.request.urlopen(self._request("GET", path), context=self.tls, timeout=timeout)
        except urllib.error.HTTPError as exc:
            raise Trouble(f"GET {path}: HTTP {exc.code}") from None
        except (OSError, ValueError) as exc:
            raise Trouble(f"GET {path}: {exc}") from None

    def configmap(self, name: str) -> dict[str, Any] | None:
        return self.request("GET", f"/api/v1/namespaces/{self.ns}/configmaps/{name}")

    def save_state(self, name: str, state: dict[str, Any]) -> None:
        patch = {"data": {STATE_KEY: json.dumps(state, sort_keys=True)}}
        if self.request("PATCH", f"/api/v1/namespaces/{self.ns}/configmaps/{name}", patch,
                        "application/merge-patch+json") is None:
            raise Trouble(f"configmap {name} is gone")

    def raycluster(self, name: str) -> dict[str, Any] | None:
        return self.request("GET", f"/apis/ray.io/v1/namespaces/{self.ns}/rayclusters/{name}")

    def ray_pods(self, cluster: str) -> list[dict[str, Any]]:
        """The RayCluster's pods as of the end of the last follow() (one LIST the first time)."""
        selector = f"{CLUSTER_LABEL}={cluster}"
        if self.pod_watch is None or self.pod_watch.selector != selector:
            self.pod_watch = PodWatch(self, selector)
        return self.pod_watch.items()

    def follow(self, seconds: float) -> None:
        """The wait between two looks: spent watching the pods (or asleep before the first look)."""
        if self.pod_watch is None:
            time.sleep(seconds)
        else:
            self.pod_watch.follow(seconds)


class PodWatch:
    """The pods of one label selector, kept as client-go's reflector keeps them
    (k8s.io/client-go/tools/cache/reflector.go: ListAndWatch lists once, then watch() watches
    from LastSyncResourceVersion with timeoutSeconds and AllowWatchBookmarks, starts a new watch
    from the last resourceVersion when one ends, and lists again only when the watch says its
    resourceVersion expired). The API side is Kubernetes' "Efficient detection of changes"
    (kubernetes.io/docs/reference/using-api/api-concepts/): a watch streams one JSON event per
    line (ADDED, MODIFIED, DELETED; BOOKMARK carries only a newer resourceVersion, "Watch
    bookmarks"); a client resumes from the last resourceVersion it saw; one the server's history
    no longer holds is answered with an ERROR event whose Status has code 410 (Gone), after which
    the client must "clear its local cache, perform a new get or list operation, and start the
    watch from the resourceVersion that was returned".

    Single-threaded: the supervisor's wait between two looks IS the watch (follow), so the pods a
    look reads are as fresh as the LIST it used to make at that moment. Any other failure of a
    watch (no connection, a stream broken mid-way, another ERROR, a "very short watch" that ends
    within a second with no event, which the reflector's handleAnyWatch also treats as an error)
    lists again before the pods are used, so a decision is never made from a cache that missed
    events. (The reflector retries a refused connection's watch from the same resourceVersion
    instead; listing is simpler here and costs one LIST per failure, none while all is well.)"""

    def __init__(self, kube: Kube, selector: str) -> None:
        self.kube, self.selector = kube, selector
        self.pods: dict[str, dict[str, Any]] = {}  # by uid
        self.rv = ""
        self.synced = False  # False: list before the pods are used or watched

    def _path(self, **query: str) -> str:
        return f"/api/v1/namespaces/{self.kube.ns}/pods?" + urllib.parse.urlencode(
            {"labelSelector": self.selector, **query})

    def items(self) -> list[dict[str, Any]]:
        if not self.synced:
            self.relist()
        return list(self.pods.values())

    def relist(self) -> None:
        found = self.kube.request("GET", self._path()) or {}
        self.pods = {p["metadata"]["uid"]: p for p in found.get("items") or []}
        self.rv = str((found.get("metadata") or {}).get("resourceVersion") or "")
        self.synced = True

    def follow(self, seconds: float) -> None:
        """Apply the pods' events for about `seconds`: watches from the last resourceVersion, each
        ended by the server at timeoutSeconds (whole seconds, as the API takes it: so at least
        one of a second, and the wait is rounded to whole seconds); never raises."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                if not self.synced:
                    self.relist()
                self._watch(max(1, round(deadline - time.monotonic())))
            except Trouble as exc:
                self.synced = False
                log.info("pods: %s", exc)
                time.sleep(max(0.0, min(1.0, deadline - time.monotonic())))  # a back-off
            if deadline - time.monotonic() < 0.5:
                return

    def _watch(self, seconds: int) -> None:
        path = self._path(watch="1", resourceVersion=self.rv, allowWatchBookmarks="true",
                          timeoutSeconds=str(seconds))
        start, events = time.monotonic(), 0
        # A read that waits past the server's own end of the stream is a dead connection.
        with self.kube.stream(path, timeout=seconds + 30) as resp:
            try:
                for line in resp:
                    if not line.strip():
                        continue
                    events += 1
                    if not self._event(json.loads(line)):
                        return
            except (OSError, ValueError, http.client.HTTPException) as exc:
                raise Trouble(f"pods watch: {exc}") from None
        if events == 0 and time.monotonic() - start < 1:  # the reflector's "very short watch"
            raise Trouble("very short watch: it ended within a second with no event")

    def _event(self, event: dict[str, Any]) -> bool:
        """Apply one event; False when the watch must end and the pods be listed again."""
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            self.synced = False
            log.info("pods watch: %s (code %s): listing again", obj.get("reason"), obj.get("code"))
            return False
        meta = obj.get("metadata") or {}
        self.rv = str(meta.get("resourceVersion") or self.rv)
        if kind in ("ADDED", "MODIFIED"):
            self.pods[meta["uid"]] = obj
        elif kind == "DELETED":
            self.pods.pop(meta.get("uid", ""), None)
        return True  # BOOKMARK: the resourceVersion only
