"""GKE's metadata server, as the sandbox's process pods reach it (sandbox/SOURCES.md#gke-metadata-server,
#gke-workload-identity): the Compute Engine metadata paths google-auth's own
`google.auth.compute_engine.Credentials` reads, answered for the pod that asks.

What google-auth 2.x asks (google/auth/compute_engine/_metadata.py and credentials.py, 2.63.0):
its root is `http://{GCE_METADATA_HOST}/computeMetadata/v1/` (the variable, else
metadata.google.internal) and its ping `http://{GCE_METADATA_IP}` (else 169.254.169.254); every
request carries `metadata-flavor: Google`, and the ping believes a server only when it answers
200 with `Metadata-Flavor: Google`. refresh() reads `instance/service-accounts/default/?recursive=true`
(JSON `{email, scopes, aliases}`; a later refresh asks by the email) and then
`instance/service-accounts/default/token` (`?scopes=a,b` when scopes are set; JSON
`{access_token, expires_in, token_type}`); a JSON body must say `Content-Type: application/json`,
anything else is taken as text; a status other than 200 is a TransportError (RefreshError out of
refresh()), 5xx retried. It also reads `project/project-id`, `project/numeric-project-id` and
`universe/universe-domain` (a 404 there means googleapis.com).

What GKE's server answers (googleapis/google-auth-library-ruby 228 and google-cloud-ruby 3750, a
GKE 1.13 node, curl -v): without the header `403 Forbidden`, `Content-Type: text/plain;
charset=utf-8`, body `GKE Metadata Server encountered an error: Missing required header
"Metadata-Flavor": "Google"` (no Metadata-Flavor header on that answer), on every path, the root
included (so are Java's and Go's pings: google-auth-library-java 283, google-cloud-go 1891);
with it, `GET /` is 200 `computeMetadata/` with `Content-Type: application/text`,
`Metadata-Flavor: Google`, `Server: GKE Metadata Server`. Who gets what follows GKE's docs
(cloud.google.com/kubernetes-engine/docs/concepts/workload-identity and how-to/workload-identity):
world_iam.IamMixin.workload_identity says it and cites the denial's text. The identity endpoint
(ID tokens) is not served (404); nor are paths GKE's server has that google-auth does not ask.

Identity: GKE's server knows a pod by its IP. The sandbox's process pods share the host's
loopback, so each pod gets a server socket of its own, on 127.0.0.1 and a port of its own, and
the kubelet hands the pod that address as GCE_METADATA_HOST and GCE_METADATA_IP
(procpods._process_env): the address a request came in on names the pod, as the pod IP does on
GKE. A socket per pod rather than one listening on all of 127.0.0.0/8: that needs binding
0.0.0.0 (every interface) or IP_TRANSPARENT (root), and macOS has only 127.0.0.1 up; a port per
pod needs neither. The variables are the sandbox's one difference from GKE (addresses): GKE sets
none and routes 169.254.169.254 to its server. Only pods on nodes whose pool runs the GKE
metadata server (workloadMetadataConfig.mode GKE_METADATA) of a cluster with a workload pool get
them; other pods have no metadata server (on GKE they would reach the node's own; not imitated).
The Kubernetes ServiceAccount's `iam.gke.io/gcp-service-account` annotation is read at each
request. Calls are counted in the record as `metadata:<path>`.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web
from google.cloud import container_v1

from rltui_sandbox.grpc_util import CloudError
from rltui_sandbox.nodes import CLUSTER_NOTE, NODEPOOL_LABEL
from rltui_sandbox.rest_util import loopback_socket
from rltui_sandbox.world_iam import WorkloadDenied
from rltui_sandbox.world_model import project_number

if TYPE_CHECKING:
    from rltui_sandbox.kube.store import KubeStore
    from rltui_sandbox.world import World

__all__ = ["ANNOTATION", "GkeMetadataServer", "PodIdentity"]

log = logging.getLogger("rltui_sandbox.metadata")

ANNOTATION = "iam.gke.io/gcp-service-account"
ROOT = "/computeMetadata/v1/"
MISSING_FLAVOR = 'GKE Metadata Server encountered an error: Missing required header "Metadata-Flavor": "Google"'
# The scopes xpk's pools get: cluster-toolkit v1.94.0 service_account_scopes' default, gke-cluster
# variables.tf lines 385-389 and gke-node-pool variables.tf lines 269-273 (cloud-platform). That
# GKE's server answers a Workload Identity pod with its node's scopes is not verified.
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
_GKE_METADATA = container_v1.WorkloadMetadataConfig.Mode.GKE_METADATA


@dataclass(frozen=True)
class PodIdentity:
    """What the server must know of a pod: its cluster's project and workload pool, and its
    Kubernetes ServiceAccount."""

    project: str
    pool: str
    namespace: str
    ksa: str


def _text(body: str, status: int = 200) -> web.Response:
    return web.Response(status=status, text=body, content_type="application/text",
                        headers={"Metadata-Flavor": "Google", "Server": "GKE Metadata Server"})


def _json(body: Any) -> web.Response:
    return web.json_response(body, headers={"Metadata-Flavor": "Google", "Server": "GKE Metadata Server"})


def _not_found() -> web.Response:
    return web.Response(status=404, text="Not Found\n", content_type="text/plain",  # the wording is the sandbox's
                        headers={"Metadata-Flavor": "Google", "Server": "GKE Metadata Server"})


class GkeMetadataServer:
    """One aiohttp app, one loopback site per pod (see the module docstring)."""

    def __init__(self, world: World, store: KubeStore) -> None:
        self.world, self.store = world, store
        self._runner: web.AppRunner | None = None
        self._sites: dict[str, tuple[web.SockSite, int]] = {}  # pod uid -> (site, port)
        self._pods: dict[int, PodIdentity] = {}  # port -> the pod it serves
        self._closing: set[asyncio.Task[None]] = set()

    # ---- the kubelet's side ---------------------------------------------------------------------

    async def env_for(self, pod: dict[str, Any], node: dict[str, Any] | None) -> dict[str, str]:
        """GCE_METADATA_HOST / GCE_METADATA_IP for a pod on a GKE_METADATA node, else {}."""
        meta = (node or {}).get("metadata") or {}
        key = (meta.get("annotations") or {}).get(CLUSTER_NOTE, "")
        pool_name = (meta.get("labels") or {}).get(NODEPOOL_LABEL, "")
        project, location, cluster = [*key.split("/"), "", "", ""][:3]
        if not (project and cluster and pool_name):
            return {}
        try:
            found = self.world.get_cluster(project, location, cluster)
        except CloudError:
            return {}
        pool = next((np for np in found.node_pools if np.name == pool_name), None)
        workload_pool = found.workload_identity_config.workload_pool
        if pool is None or not workload_pool or pool.config.workload_metadata_config.mode != _GKE_METADATA:
            return {}
        spec, pmeta = pod.get("spec") or {}, pod.get("metadata") or {}
        ksa = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        address = await self.serve_pod(str(pmeta["uid"]), PodIdentity(project, workload_pool,
                                                                       pmeta.get("namespace") or "default", ksa))
        return {"GCE_METADATA_HOST": address, "GCE_METADATA_IP": address}

    async def serve_pod(self, uid: str, identity: PodIdentity) -> str:
        """The pod's own address ("127.0.0.1:PORT"); the same one again while the pod lives."""
        if self._runner is None:
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
            await self._runner.setup()
        if uid not in self._sites:
            sock = loopback_socket()
            site = web.SockSite(self._runner, sock)
            await site.start()
            self._sites[uid] = (site, sock.getsockname()[1])
        port = self._sites[uid][1]
        self._pods[port] = identity
        return f"127.0.0.1:{port}"

    def release(self, uid: str) -> None:
        """The pod is gone: its address stops answering."""
        entry = self._sites.pop(uid, None)
        if entry is None:
            return
        site, port = entry
        self._pods.pop(port, None)
        task = asyncio.ensure_future(site.stop())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        for uid in list(self._sites):
            self.release(uid)
        await asyncio.gather(*self._closing, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ---- the pod's side -------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Metadata-Flavor") != "Google":
            return web.Response(status=403, text=MISSING_FLAVOR, content_type="text/plain")
        sock = request.transport.get_extra_info("sockname") if request.transport is not None else None
        identity = self._pods.get(sock[1]) if sock else None
        if identity is None:  # its pod went while the request was on its way
            return _not_found()
        path = request.path
        self.world.record.count("metadata:" + path)
        if request.method != "GET":
            return web.Response(status=405, text="Method Not Allowed\n", content_type="text/plain")
        if path == "/":
            return _text("computeMetadata/\n")
        if path == ROOT:
            return _text("instance/\nproject/\n")
        if path == ROOT + "project/project-id":
            return _text(identity.project)
        if path == ROOT + "project/numeric-project-id":
            return _text(str(project_number(identity.project)))
        if path.startswith(ROOT + "instance/service-accounts/"):
            return self._service_account(identity, path.removeprefix(ROOT + "instance/service-accounts/"),
                                         request.query.get("recursive") == "true")
        return _not_found()

    def _gsa(self, identity: PodIdentity) -> str | None:
        found = self.store.list_sync("serviceaccounts", identity.namespace,
                                     field_selector=f"metadata.name={identity.ksa}")
        notes = ((found[0].get("metadata") or {}).get("annotations") or {}) if found else {}
        return notes.get(ANNOTATION) or None

    def _service_account(self, identity: PodIdentity, rest: str, recursive: bool) -> web.Response:
        gsa = self._gsa(identity)
        email = gsa or identity.pool  # the email GKE answers before any token (see world_iam)
        if rest == "":
            return _text(f"default/\n{email}/\n")
        account, _, leaf = rest.partition("/")
        if account not in ("default", email):
            return _not_found()
        if leaf == "" and recursive:
            return _json({"aliases": ["default"], "email": email, "scopes": SCOPES})
        if leaf == "":
            return _text("aliases\nemail\nidentity\nscopes\ntoken\n")
        if leaf == "email":
            return _text(email)
        if leaf == "aliases":
            return _text("default")
        if leaf == "scopes":
            return _text("\n".join(SCOPES) + "\n")
        if leaf == "token":
            try:
                _, principal = self.world.workload_identity(identity.project, identity.pool, identity.namespace,
                                                            identity.ksa, gsa)
            except WorkloadDenied as exc:
                return _text(str(exc), status=403)
            token, expires_in = self.world.mint_access_token(principal)
            return _json({"access_token": token, "expires_in": expires_in, "token_type": "Bearer"})
        return _not_found()
