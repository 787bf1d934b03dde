"""The budget guard: the supervisor's part of `rltui submit --down-after gpus` and `--max-cost USD`.

It runs inside the job supervisor (supervisor.py calls `Guard.look` on every look, also once the
run is final), so it is written for the same image: Python 3.9, the standard library, and
google-auth, imported only when the guard first calls GKE (a supervisor without a guard needs
nothing new). The rayproject/ray:2.46.0 image has google-auth: the image installs Ray's wheel
with its `[all]` extra (ray-project/ray docker/ray/Dockerfile), which holds `default`'s
`opencensus` (ray 2.46.0 python/setup.py, setup_spec.extras["default"]); opencensus 0.11.4
requires google-api-core, which requires google-auth>=2.14.1 (their setup.py; .venv-ray has
google-auth 2.63.0 so).

What it reads: spec.json's `guard` (plan/guard.py writes it at submit): down_after ("gpus" or
None), max_cost_usd (or None), gpu_pools (the GPU node pools' names), gpu_node_hour_usd (one
GPU node-hour, from the Cloud Billing Catalog through rltui's cost meter; None when the catalog
had no price), currency, project, location, cluster, container_api (GKE's REST base URL) and
time_scale (real seconds per reference second: 1 on Google, 1/speed in the sandbox).

Each look:
- the spend: every Kubernetes Node of the GPU pools (label cloud.google.com/gke-nodepool, the
  GKE node label that names a node's pool) costs the node-hour price from its
  metadata.creationTimestamp until now, or until the look that found it gone: a Spot node that
  was replaced is a new node, and the old one's hours stay in state.json (`guard.nodes`). A
  node that came and went between two looks is not seen (a look every poll_s: 10 s on GKE).
  Hours are reference hours (real seconds / time_scale), so the sandbox's nodes cost what GKE's
  would over the same reference time. `state["spend_usd"]` is set every look.
- the decision: the spend past max_cost_usd stops the job first (Ray's POST /api/jobs/<id>/stop
  of the latest attempt; the run STOPPED, saying the budget was reached; event `budget`), then
  deletes the GPU pools; a final run with down_after "gpus" deletes them too. With --max-cost
  alone the guard keeps watching after the run ends: the GPU nodes bill until they are gone.
- the deletion, per pool: DELETE v1/projects/P/locations/L/clusters/C/nodePools/NP, then GET of
  the Operation it returns until DONE (container.v1 REST reference:
  projects.locations.clusters.nodePools/delete, projects.locations.operations/get). GKE runs one
  operation on a cluster at a time and refuses another with 400 FAILED_PRECONDITION, ErrorInfo
  reason CLUSTER_ALREADY_HAS_OPERATION (sandbox/SOURCES.md#gke-one-operation-at-a-time; rltui's
  GKE adapter treats it as "busy, try again", rltui/cloud/gke.py): tried again on a later look.
  404 is a pool already gone. 403 is a guard that may not delete (its identity lacks the role):
  said in state.json and, once refused for REFUSED_FOR_S, given up (`rltui down` deletes them):
  longer than IAM's documented propagation of a new binding ("typically 2 minutes, up to 7":
  cloud.google.com/iam/docs/access-change-propagation), so a budget crossed soon after submit
  is not given up while the guard's role is still on its way.
  Each call has a timeout, so no look waits long.
- the token: google.auth.compute_engine.Credentials, from the metadata server the pod sees
  (GKE's, with Workload Identity Federation the Google service account the supervisor's
  Kubernetes ServiceAccount is linked to: cloud.google.com/kubernetes-engine/docs/how-to/
  workload-identity; google-auth reads GCE_METADATA_HOST for its address).

Before it deletes, it asks Ray for the jobs the head runs: one of another run keeps the pools
(the guard settles, event `guard`); a guard that gives up says so too (event `guard`).

Its progress is state.json's `guard`: {state: watching|stopping|deleting|done|failed, spend_usd,
limit_usd, pools: {name: present|deleting|deleted}, message} (and its own book: nodes,
operations, refused). Everything from status codes and ErrorInfo reasons, never error text.
"""

from __future__ import annotations

import calendar
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable

try:  # in the package (rltui's tests), or beside these files in the ConfigMap's folder (the pod)
    from .kubeapi import Trouble
except ImportError:
    from kubeapi import Trouble  # type: ignore[import-not-found,no-redef]

log = logging.getLogger("rltui-supervisor")

POOL_LABEL = "cloud.google.com/gke-nodepool"  # GKE's node label naming the node's pool
BUSY_REASON = "CLUSTER_ALREADY_HAS_OPERATION"
CALL_TIMEOUT_S = 20.0  # one GKE call; a look makes at most two per pool
REFUSED_FOR_S = 600.0  # reference seconds of refusals (403, or no token) before the guard gives up
WATCHING, STOPPING, DELETING, DONE, FAILED = "watching", "stopping", "deleting", "done", "failed"
SETTLED = (DONE, FAILED)
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"

# An HTTP call: (method, url) -> (status code, JSON body); raises Trouble when nothing answered.
Http = Callable[[str, str], tuple[int, dict[str, Any]]]
Emit = Callable[[str, str], None]  # (event kind, text)


def stamp(text: str) -> float:
    """RFC 3339 seconds (creationTimestamp) as epoch seconds; 0 when unreadable."""
    try:
        return float(calendar.timegm(time.strptime(str(text)[:19], "%Y-%m-%dT%H:%M:%S")))
    except (TypeError, ValueError):
        return 0.0


def money(amount: float | None, currency: str = "USD") -> str:
    if amount is None:
        return "an unknown amount"
    text = f"{amount:,.0f}" if amount >= 100 else f"{amount:,.2f}"
    return f"${text}" if currency == "USD" else f"{text} {currency}"


def fresh(guard: dict[str, Any]) -> dict[str, Any]:
    """The guard's first state.json entry."""
    return {"state": WATCHING, "spend_usd": None, "limit_usd": guard.get("max_cost_usd"),
            "down_after": guard.get("down_after"), "currency": guard.get("currency") or "USD",
            "pools": {str(p): "present" for p in guard.get("gpu_pools") or []}, "message": "",
            "nodes": {}, "operations": {}, "refused_since": None}


def pending(state: dict[str, Any]) -> bool:
    """Whether the guard still has work once the run is final: it is not done or failed, and
    it has something to act on (down_after, or a budget the still-billing nodes may cross)."""
    gs = state.get("guard")
    if not isinstance(gs, dict) or gs.get("state") in SETTLED:
        return False
    return bool(gs.get("down_after")) or gs.get("limit_usd") is not None


def account_nodes(book: dict[str, Any], nodes: list[dict[str, Any]], pools: list[str], now: float) -> None:
    """Write the GPU pools' Nodes into the book: a new one from its creationTimestamp, one the
    list no longer has ended now (a replaced Spot node's successor is a new entry)."""
    seen = set()
    for node in nodes:
        meta = node.get("metadata") or {}
        pool = (meta.get("labels") or {}).get(POOL_LABEL)
        uid = str(meta.get("uid") or meta.get("name") or "")
        if pool not in pools or not uid:
            continue
        seen.add(uid)
        entry = book.setdefault(uid, {"name": meta.get("name", ""), "pool": pool,
                                      "created": stamp(meta.get("creationTimestamp", "")) or now, "gone": 0})
        entry["gone"] = 0
    for uid, entry in book.items():
        if uid not in seen and not entry.get("gone"):
            entry["gone"] = now


def spend(book: dict[str, Any], now: float, time_scale: float, node_hour: float | None) -> float | None:
    """What the booked nodes have cost: their reference hours times the node-hour price."""
    if node_hour is None:
        return None
    seconds = sum(max(0.0, float(e.get("gone") or now) - float(e.get("created") or now)) for e in book.values())
    return seconds / max(time_scale, 1e-9) / 3600.0 * node_hour


def live_nodes(book: dict[str, Any]) -> int:
    return sum(1 for e in book.values() if not e.get("gone"))


def error_of(body: dict[str, Any]) -> tuple[str, str]:
    """(google.rpc status name, ErrorInfo reason) of Google's JSON error (AIP-193)."""
    found = body.get("error")
    error: dict[str, Any] = found if isinstance(found, dict) else {}
    reason = next((str(d.get("reason") or "") for d in error.get("details") or []
                   if isinstance(d, dict) and str(d.get("@type", "")).endswith("google.rpc.ErrorInfo")), "")
    return str(error.get("status") or ""), reason


class MetadataToken:
    """The pod's token from the metadata server (google.auth.compute_engine.Credentials), kept
    until google-auth says it is no longer valid. Imported on first use."""

    def __init__(self) -> None:
        self.creds: Any = None

    def __call__(self) -> str:
        import google.auth.exceptions
        from google.auth import compute_engine
        from google.auth.transport.requests import Request

        try:
            if self.creds is None:
                self.creds = compute_engine.Credentials(scopes=[CLOUD_PLATFORM])
            if not self.creds.valid:
                self.creds.refresh(Request())
        except google.auth.exceptions.GoogleAuthError as exc:
            raise NoToken(f"no token from the metadata server ({type(exc).__name__})") from None
        return str(self.creds.token)


class NoToken(Exception):
    """The metadata server gave no token (no Workload Identity, or the KSA not linked)."""


def rest_http(token: Callable[[], str]) -> Http:
    """GKE's REST API over urllib with a bearer token; an HTTP error is an answer, not Trouble."""
    def call(method: str, url: str) -> tuple[int, dict[str, Any]]:
        req = urllib.request.Request(url, method=method, headers={
            "Authorization": f"Bearer {token()}", "Accept": "application/json",
            "User-Agent": "rltui-supervisor"})
        try:
            with urllib.request.urlopen(req, timeout=CALL_TIMEOUT_S) as resp:
                return resp.status, _json(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _json(exc.read())
        except (OSError, ValueError) as exc:
            raise Trouble(f"{method} {url}: {exc}") from None

    return call


def _json(raw: bytes) -> dict[str, Any]:
    try:
        found = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


class Guard:
    """One run's guard; `http` is GKE's REST (default: urllib with the metadata server's token)."""

    def __init__(self, http: Http | None = None) -> None:
        self._http = http
        self._now, self._scale = 0.0, 1.0  # the look's time and the spec's time_scale

    @property
    def http(self) -> Http:
        if self._http is None:
            self._http = rest_http(MetadataToken())
        return self._http

    def look(self, spec: dict[str, Any], state: dict[str, Any], now: float,
             nodes: list[dict[str, Any]] | None, stop_job: Callable[[], None], emit: Emit,
             others: Callable[[], list[str]] = list) -> None:
        """One look: the spend from `nodes` (the GPU pools' Nodes; None when they could not be
        read: the spend stays), then what the guard decides and does. `stop_job` stops the
        latest attempt (Trouble when Ray does not answer: tried again next look)."""
        guard = spec.get("guard")
        if not isinstance(guard, dict):
            return
        gs = state.setdefault("guard", fresh(guard))
        self._now, self._scale = now, float(guard.get("time_scale") or 1.0)
        if gs.get("state") in SETTLED:
            return
        if nodes is not None:
            account_nodes(gs["nodes"], nodes, list(gs["pools"]), now)
        cost = spend(gs["nodes"], now, float(guard.get("time_scale") or 1.0), guard.get("gpu_node_hour_usd"))
        gs["spend_usd"] = state["spend_usd"] = None if cost is None else round(cost, 4)  # None: no price
        limit = guard.get("max_cost_usd")
        final = state.get("status") in ("SUCCEEDED", "FAILED", "STOPPED")
        if gs["state"] in (WATCHING, STOPPING):
            if limit is not None and cost is not None and cost >= float(limit):
                if not final:
                    gs["state"] = STOPPING
                    try:
                        stop_job()
                    except Trouble as exc:  # still STOPPING: tried again next look
                        gs["message"] = f"the budget was reached; stopping the job: {exc}"
                        return
                    self._stopped(state, guard, cost, now)
                emit("budget", f"the budget was reached: ~{money(cost, gs['currency'])} spent of "
                               f"{money(float(limit), gs['currency'])}; deleting the GPU node pool(s)")
                gs["state"] = DELETING
            elif final and guard.get("down_after") == "gpus":
                gs["state"] = DELETING
        if gs["state"] == DELETING and not gs["operations"] and not self._alone(gs, others, emit):
            return
        if gs["state"] == DELETING:
            self._delete(guard, gs, emit)
        if gs["state"] == FAILED:
            emit("guard", f"the budget guard gave up: {gs['message']}; the GPU nodes still bill")

    @staticmethod
    def _alone(gs: dict[str, Any], others: Callable[[], list[str]], emit: Emit) -> bool:
        """Whether no other run's job is active on the RayCluster: the GPU pools are the
        cluster's, not the run's, so a later run training on them keeps them (the guard
        settles, saying so). A head that does not answer defers the deletion to a later look."""
        try:
            busy = others()
        except Trouble as exc:
            gs["message"] = f"waiting to delete the GPU node pool(s): cannot tell whether another job runs ({exc})"
            return False
        if busy:
            gs["state"] = DONE
            gs["message"] = (f"GPU node pool(s) kept: job {', '.join(sorted(busy)[:3])} of another run is using"
                             " them")
            emit("guard", gs["message"])
            return False
        return True

    @staticmethod
    def _stopped(state: dict[str, Any], guard: dict[str, Any], cost: float, now: float) -> None:
        currency = str(guard.get("currency") or "USD")
        attempt = (state.get("attempts") or [{}])[-1]
        attempt["status"] = "STOPPED"
        attempt.setdefault("ended_at", round(now, 3))
        state["status"] = "STOPPED"
        state["message"] = (f"the budget was reached (~{money(cost, currency)} spent of "
                            f"{money(float(guard['max_cost_usd']), currency)}): the job was stopped and "
                            f"the GPU node pool(s) are being deleted")
        state.pop("waiting", None)

    def _url(self, guard: dict[str, Any], path: str) -> str:
        base = str(guard.get("container_api") or "https://container.googleapis.com/")
        where = (f"v1/projects/{urllib.parse.quote(str(guard['project']))}/locations/"
                 f"{urllib.parse.quote(str(guard['location']))}")
        return base.rstrip("/") + "/" + where + path

    def _delete(self, guard: dict[str, Any], gs: dict[str, Any], emit: Emit) -> None:
        said = []
        for pool in sorted(gs["pools"]):
            if gs["pools"][pool] == "deleted":
                continue
            try:
                said.append(self._one(guard, gs, pool))
            except NoToken as exc:
                said.append(self._refused(gs, pool, str(exc)))
            except Trouble as exc:
                said.append(f"node pool {pool}: GKE did not answer ({exc}); trying again")
            if gs["state"] == FAILED:
                return
        gone = sorted(p for p, s in gs["pools"].items() if s == "deleted")
        if len(gone) == len(gs["pools"]):
            gs["state"] = DONE
            gs["message"] = f"GPU node pool(s) {', '.join(gone)} deleted"
            emit("torn_down", f"GPU node pool(s) {', '.join(gone)} deleted; Lustre and the checkpoints are kept")
        else:
            gs["message"] = "; ".join(s for s in said if s)

    def _one(self, guard: dict[str, Any], gs: dict[str, Any], pool: str) -> str:
        said = self._call(guard, gs, pool)
        if "refused" not in said and "may not delete" not in said:
            gs["refused_since"] = None  # refusals count in a row: an answer in between starts over
        return said

    def _call(self, guard: dict[str, Any], gs: dict[str, Any], pool: str) -> str:
        op = gs["operations"].get(pool)
        if op:
            status, body = self.http("GET", self._url(guard, f"/operations/{urllib.parse.quote(op)}"))
            if status == 200 and body.get("status") == "DONE":
                gs["operations"].pop(pool)
                found = body.get("error")
                error: dict[str, Any] = found if isinstance(found, dict) else {}
                if error.get("code") or error.get("message"):
                    gs["pools"][pool] = "present"
                    return f"node pool {pool}: its deletion failed (code {error.get('code')}); trying again"
                gs["pools"][pool] = "deleted"
                return ""
            if status == 404:
                gs["operations"].pop(pool)  # GKE no longer knows it: ask for the pool again
            elif status == 403:
                return self._refused(gs, pool, "403 PERMISSION_DENIED reading its operation")
            return f"node pool {pool}: being deleted"
        path = (f"/clusters/{urllib.parse.quote(str(guard['cluster']))}/nodePools/"
                f"{urllib.parse.quote(pool)}")
        status, body = self.http("DELETE", self._url(guard, path))
        name = str(body.get("name") or "")
        if 200 <= status < 300 and name:
            gs["operations"][pool] = name.rsplit("/", 1)[-1]
            gs["pools"][pool] = "deleting"
            log.info("guard: deleting node pool %s (%s)", pool, name)
            return f"node pool {pool}: being deleted"
        if status == 404:
            gs["pools"][pool] = "deleted"
            return ""
        code, reason = error_of(body)
        if status == 400 and reason == BUSY_REASON:
            return f"node pool {pool}: the cluster is busy with another operation; trying again"
        if status == 403:
            return self._refused(gs, pool, f"403 {code or 'PERMISSION_DENIED'}"
                                           + (f" ({reason})" if reason else ""))
        return f"node pool {pool}: GKE answered {status} {code}; trying again"

    def _refused(self, gs: dict[str, Any], pool: str, why: str) -> str:
        since = gs.get("refused_since")
        if since is None:
            gs["refused_since"] = since = self._now
        waited = (self._now - float(since)) / max(self._scale, 1e-9)
        if waited >= REFUSED_FOR_S:
            gs["state"] = FAILED
            gs["message"] = (f"the guard may not delete node pool {pool}: {why}; `rltui down` deletes "
                             f"what is left")
            log.info("guard: gave up: %s", gs["message"])
            return str(gs["message"])
        return f"node pool {pool}: refused, {why}; trying again for {REFUSED_FOR_S - waited:.0f} s more"


def nodes_path(pools: list[str]) -> str:
    """The Nodes of the GPU pools, by their pool label (a set-based label selector)."""
    selector = f"{POOL_LABEL} in ({','.join(sorted(pools))})"
    return "/api/v1/nodes?" + urllib.parse.urlencode({"labelSelector": selector})

