"""`terraform apply` and `terraform destroy` of the a4 blueprint, as gcluster runs them.

What each call does and when it gives up is the provider's (terraform-provider-google v7.40.0):

- Every request is retried only while the provider's predicates say so. By default that is
  transport/error_retry_predicates.go defaultErrorRetryPredicates: HTTP 429/500/502/503
  (isCommonRetryableErrorCode), 409 operationInProgress, 400 resourceNotReady on networks and
  subnetworks, 403 per-minute quota; a 400 failedPrecondition (GKE's "busy") is NOT among them.
- google_container_cluster create (resource_container_cluster.go resourceContainerClusterCreate):
  Create with transport_tpg.Retry (default predicates), d.SetId, then ContainerOperationWait; an
  operation that failed leaves the id set ("Don't clear cluster id, this will taint the
  resource"). Then, with remove_default_node_pool, NodePools.Delete("default-pool") under the
  same default predicates and a 1 minute timeout (retry_utils.go Retry: Timeout 0 -> 1 minute):
  another client's operation on the cluster at that moment fails the create and taints the
  cluster, which the next apply destroys and creates again.
- Updates of an existing cluster (resourceContainerClusterUpdate): containerClusterAwaitRestingState
  (until RUNNING), then each change (addons_config, resource_labels, ...) through
  transport_tpg.LockedCall with no retry on a busy cluster.
- google_container_node_pool create and delete (resource_container_node_pool.go): retried while
  tpgresource.IsFailedPreconditionError (400 with errors[].reason failedPrecondition) or
  IsQuotaError (429), until the resource's timeout (30 minutes); a created pool whose operation
  failed but which exists (e.g. out of GPU quota, state ERROR) ends the create with "NodePool X
  was created in the error state" and stays in the state, tainted.
- Cluster delete: retried on any error for 30 s (resourceContainerClusterDelete).
- Operations are polled every 10 s (transport/config.go PollInterval), so Terraform notices a
  DONE up to 10 s late; the sandbox records that wait (World._poll_lag).
- A resource absent from the cloud but present in the state is dropped from the state on refresh
  (the provider's handleNotFoundError); one present in the cloud but absent from the state is
  created anyway and the API's 409 alreadyExists fails the apply. A GPU pool deleted outside
  Terraform therefore fails nothing: gke-node-pool's instance-template data source waits for the
  pool planned again (Terraform defers a data source whose managed dependencies have changes
  pending; SOURCES.md#xpk-delete-reads-cluster-first).
- destroy reads the data sources first: the kubectl-apply modules (main.tf line 163) and
  gke-node-pool (main.tf line 96) read data "google_container_cluster", whose read fails with
  "<id> not found" once the cluster is gone (data_source_google_container_cluster.go), which
  stops the destroy before it deletes anything. Not verified against a live project: that
  Terraform 1.12 still reads these data sources when planning a destroy.
- A failed request stops what depends on it; independent resources go on; the apply or destroy
  then fails with every error (Terraform's own behaviour, as any failed apply shows).

Timing comes from the latency profile (the milestones xpk_networks, xpk_control_plane,
xpk_node_pool, xpk_done after the start of a create; gke_node_pool_delete,
gke_system_pool_create, gke_cluster_delete and xpk_delete) on the sandbox's clock.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

from google.cloud import container_v1

from rltui_sandbox.grpc_util import CloudError, FailedPrecondition, NotFound
from rltui_sandbox.rest_util import HTTP_STATUS
from rltui_sandbox.toolkit.blueprint import Params, Res, a4_resources
from rltui_sandbox.toolkit.resources import Cloud, desired_addons
from rltui_sandbox.toolkit.state import State

if TYPE_CHECKING:
    from rltui_sandbox.world import World

Say = Callable[[str], None]
MILESTONES = ("xpk_networks", "xpk_control_plane", "xpk_node_pool", "xpk_done")
NETWORK_KINDS = ("network", "subnet", "firewall", "nat_ip", "router")
POOL_TIMEOUT_S = 30 * 60.0     # google_container_node_pool's default create/delete timeout
CLUSTER_TIMEOUT_S = 40 * 60.0  # google_container_cluster's default timeouts


class TerraformFailed(FailedPrecondition):
    """The apply or destroy failed: the message is Terraform's error output."""



# google.rpc code -> the errors[].reason GKE's REST front end sends (terraform-provider-google #1643
# quotes "googleapi: Error 400: ... is currently upgrading cluster ..., failedPrecondition").
_REASONS = {"FAILED_PRECONDITION": "failedPrecondition", "NOT_FOUND": "notFound",
            "ALREADY_EXISTS": "alreadyExists", "INVALID_ARGUMENT": "invalid", "RESOURCE_EXHAUSTED": "quotaExceeded",
            "PERMISSION_DENIED": "forbidden", "UNAVAILABLE": "backendError"}


def googleapi(exc: CloudError) -> tuple[int, str, str]:
    """(HTTP status, errors[0].reason, googleapi.Error's text) of a refusal, as the provider's
    Go client sees it ("googleapi: Error <code>: <message>, <reason>")."""
    status = HTTP_STATUS.get(exc.code, 500)
    reason = getattr(exc, "compute_reason", "") or _REASONS.get(exc.code, "")
    return status, reason, f"googleapi: Error {status}: {exc.message}, {reason}"


def default_retryable(exc: CloudError) -> bool:
    """transport/error_retry_predicates.go defaultErrorRetryPredicates (the HTTP ones)."""
    status, reason, text = googleapi(exc)
    return (status in (429, 500, 502, 503) or (status == 409 and "operationInProgress" in text)
            or (status == 400 and reason == "resourceNotReady" and "networks" in text))


def busy_retryable(exc: CloudError) -> bool:
    """tpgresource.IsFailedPreconditionError or IsQuotaError (node pool create and delete)."""
    status, reason, _ = googleapi(exc)
    return (status == 400 and reason == "failedPrecondition") or status == 429


class Terraform:
    """One apply or destroy of one deployment's a4 blueprint against the World."""

    def __init__(self, world: World, params: Params, state: State, say: Say,
                 poll_lag: Callable[[str], None]) -> None:
        self.world, self.p, self.state, self.say = world, params, state, say
        self.cloud = Cloud(world, params)
        self._poll_lag = poll_lag
        self.resources = a4_resources(params)
        self._by_address = {r.address: r for r in self.resources}
        self._start = time.monotonic()
        self.added = self.changed = self.destroyed = 0

    # ---- time ------------------------------------------------------------------------------------

    def _real(self, ref_s: float) -> float:
        return ref_s / self.world.clock.speed

    def _left(self, offset_s: float) -> float:
        """Real seconds until `offset_s` (real) after this run started."""
        return max(0.0, offset_s - (time.monotonic() - self._start))

    async def _retry(self, call: Callable[[], Any], retryable: Callable[[CloudError], bool],
                     timeout_ref_s: float) -> Any:
        """helper/retry.Retry: again while `retryable`, waits from 0.5 s doubling to 10 s."""
        deadline, wait = time.monotonic() + self._real(timeout_ref_s), 0.5
        while True:
            try:
                return call()
            except CloudError as exc:
                if not retryable(exc) or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(self._real(wait))
            wait = min(10.0, wait * 2)

    async def _wait_op(self, op: container_v1.Operation) -> container_v1.Operation:
        """ContainerOperationWait: poll GetOperation every 10 s until DONE."""
        poll = self._real(self.world.terraform_poll_ref_s)
        while True:
            cur = self.world.get_cluster_operation(self.p.project, self.p.region, op.name)
            if cur.status == container_v1.Operation.Status.DONE:
                self._poll_lag(f"projects/{self.p.project}/locations/{self.p.region}/clusters/{self.p.cluster}")
                return cur
            await asyncio.sleep(poll)

    async def _resting(self) -> None:
        """containerClusterAwaitRestingState: until the cluster is RUNNING."""
        poll, deadline = self._real(self.world.terraform_poll_ref_s), time.monotonic() + self._real(CLUSTER_TIMEOUT_S)
        while self.cloud.cluster_status() != "RUNNING":
            if time.monotonic() > deadline:
                raise TerraformFailed(f"Error: timeout while waiting for cluster {self.p.cluster} to be RUNNING")
            await asyncio.sleep(poll)

    # ---- output ----------------------------------------------------------------------------------

    def _fail(self, res: Res, what: str, exc: CloudError | str) -> TerraformFailed:
        text = exc if isinstance(exc, str) else googleapi(exc)[2]
        message = (f"Error: {what}: {text}\n\n  with {res.address},\n  on modules/embedded/modules/"
                   f"{_module_path(res.module)}/main.tf")
        self.say(message)
        return TerraformFailed(message)

    # ---- refresh ---------------------------------------------------------------------------------

    async def _refresh(self) -> None:
        """Drop what the cloud no longer has; wait for a cluster still being created by a killed
        run (the provider persists the create's operation and waits for it on the next read)."""
        for address in list(self.state.instances):
            res = self._by_address.get(address)
            if res is None:
                continue
            if res.kind == "kubectl":
                if self.cloud.cluster_status() == "":
                    self.state.drop(address)
                continue
            if not self.cloud.exists(res):
                self.state.drop(address)
            elif res.kind == "cluster" and self.cloud.cluster_status() == "PROVISIONING":
                while self.cloud.cluster_status() == "PROVISIONING":
                    await asyncio.sleep(self._real(self.world.terraform_poll_ref_s))

    # ---- apply -----------------------------------------------------------------------------------

    async def apply(self) -> None:
        await self._refresh()
        t_net, t_cp, t_np, t_done = self.world.clock.offsets(MILESTONES)
        errors: list[TerraformFailed] = []
        failed: set[str] = set()

        def blocked(res: Res) -> bool:
            return any(d in failed for d in res.deps)

        todo = [r for r in self.resources if r.kind in NETWORK_KINDS and self._wanted(r)]
        if todo:
            for r in todo:
                self.say(f"{r.address}: Creating...")
            with self.world.record.operation("xpk.networks", f"projects/{self.p.project}/global/networks/"
                                             f"{self.p.cluster}-net-0", key="xpk_networks"):
                await asyncio.sleep(self._left(t_net))
        for r in self.resources:
            if r.kind not in NETWORK_KINDS:
                continue
            if blocked(r):
                failed.add(r.address)
                continue
            try:
                await self._ensure_compute(r)
            except TerraformFailed as exc:
                errors.append(exc)
                failed.add(r.address)
        cluster = next(r for r in self.resources if r.kind == "cluster")
        if blocked(cluster):
            raise _joined(errors)
        try:   # the control plane is RUNNING at its milestone, or after its own time when late
            await self._ensure_cluster(cluster, max(self._left(t_cp), t_cp - t_net))
        except TerraformFailed as exc:
            raise _joined([*errors, exc]) from None
        for pool in (r for r in self.resources if r.kind == "node_pool"):
            try:
                await self._ensure_pool(pool, t_cp, t_np)
            except TerraformFailed as exc:
                errors.append(exc)
        kubectl = [r for r in self.resources if r.kind == "kubectl" and r.address not in self.state]
        if kubectl:
            target = f"projects/{self.p.project}/locations/{self.p.region}/clusters/{self.p.cluster}"
            with self.world.record.operation("xpk.workloads", target, key="xpk_done"):
                await asyncio.sleep(max(self._left(t_done), t_done - t_np))
            for r in kubectl:
                self.state.put(r, id=r.address)
                self.say(f"{r.address}.kubectl_manifest.apply_doc[0]: Creation complete")
        if errors:
            raise _joined(errors)
        self.say(f"Apply complete! Resources: {self.added} added, {self.changed} changed, {self.destroyed} destroyed.")

    def _wanted(self, res: Res) -> bool:
        inst = self.state.get(res.address)
        return inst is None or inst.tainted

    async def _ensure_compute(self, res: Res) -> None:
        inst = self.state.get(res.address)
        if inst is not None and not inst.tainted:
            return
        if inst is not None:   # tainted: replace
            await self._destroy_compute(res)
        try:
            await self._retry(lambda: self.cloud.create(res), default_retryable, 20 * 60.0)
        except CloudError as exc:
            raise self._fail(res, f"Error creating {_noun(res)}", exc) from None
        self.state.put(res, id=self.cloud.path(res))
        self.added += 1
        self.say(f"{res.address}: Creation complete [id={self.cloud.path(res)}]")

    async def _ensure_cluster(self, res: Res, create_s: float) -> None:
        inst = self.state.get(res.address)
        if inst is not None and inst.tainted:
            self.say(f"{res.address}: Destroying... [id={self.cloud.path(res)}] (tainted)")
            await self._delete_cluster(res)
            inst = None
        if inst is not None:
            await self._update_cluster(res)
            return
        self.say(f"{res.address}: Creating...")
        try:
            op = await self._retry(lambda: self.cloud.create_cluster(res, create_s), default_retryable, 60.0)
        except CloudError as exc:
            raise self._fail(res, "error creating cluster", exc) from None
        self.state.put(res, id=self.cloud.path(res))   # d.SetId before the wait
        done = await self._wait_op(op)
        if container_v1.Operation.pb(done).HasField("error"):
            if self.cloud.cluster_status() == "":
                self.state.drop(res.address)
            else:
                self.state.taint(res.address)
            raise self._fail(res, "Error waiting for creating GKE cluster", done.error.message)
        try:
            op = await self._retry(lambda: self.cloud.delete_pool("default-pool"), default_retryable, 60.0)
        except CloudError as exc:
            self.state.taint(res.address)
            raise self._fail(res, "Error deleting default node pool", exc) from None
        done = await self._wait_op(op)
        if container_v1.Operation.pb(done).HasField("error"):
            self.state.taint(res.address)
            raise self._fail(res, "Error while waiting to delete default node pool", done.error.message)
        self.added += 1
        self.say(f"{res.address}: Creation complete [id={self.cloud.path(res)}]")

    async def _update_cluster(self, res: Res) -> None:
        """A re-apply puts back the blueprint's addons (addons_config is not in the module's
        lifecycle ignore_changes, which lists node_config and min_master_version only) and its
        own labels, leaving labels others added (resource_labels is non-authoritative)."""
        wrong_addons = self.cloud.addons_drift()
        wrong_labels = self.cloud.labels_drift(res.spec["labels"])
        if not (wrong_addons or wrong_labels):
            return
        self.say(f"{res.address}: Modifying... [id={self.cloud.path(res)}]")
        await self._resting()
        if wrong_addons:
            try:
                op = self.cloud.update_addons(desired_addons())
            except CloudError as exc:
                raise self._fail(res, "googleapi", exc) from None
            await self._wait_op(op)
        if wrong_labels:
            try:
                op = self.cloud.set_labels(res.spec["labels"])
            except CloudError as exc:
                raise self._fail(res, "googleapi", exc) from None
            await self._wait_op(op)
        self.changed += 1
        self.say(f"{res.address}: Modifications complete [id={self.cloud.path(res)}]")

    async def _ensure_pool(self, res: Res, t_cp: float, t_np: float) -> None:
        inst = self.state.get(res.address)
        if inst is not None and not inst.tainted:
            return
        if inst is not None:
            await self._delete_pool(res)
        if res.name == "system":
            seconds = self.world.clock.seconds("gke_system_pool_create")
        else:   # the GPU pool is ready at the profile's milestone, however late it started
            seconds = max(self._left(t_np), (t_np - t_cp) - self.world.clock.seconds("gke_node_pool_delete")
                          - self.world.clock.seconds("gke_system_pool_create"))
        self.say(f"{res.address}: Creating...")
        try:
            op = await self._retry(lambda: self.cloud.create_pool(res, seconds), busy_retryable, POOL_TIMEOUT_S)
        except CloudError as exc:
            raise self._fail(res, "error creating NodePool", exc) from None
        self.state.put(res, id=self.cloud.path(res))
        done = await self._wait_op(op)
        if container_v1.Operation.pb(done).HasField("error"):
            if not self.cloud.exists(res):
                self.state.drop(res.address)
                raise self._fail(res, "error creating NodePool", done.error.message)
            self.state.taint(res.address)
            raise self._fail(res, "error creating NodePool",
                             f"NodePool {res.name} was created in the error state \"ERROR\"")
        self.added += 1
        self.say(f"{res.address}: Creation complete [id={self.cloud.path(res)}]")

    # ---- destroy ---------------------------------------------------------------------------------

    async def destroy(self) -> None:
        cluster = next(r for r in self.resources if r.kind == "cluster")
        if cluster.address in self.state and self.cloud.cluster_status() == "":
            data = "module.workload-manager-install.data.google_container_cluster.gke_cluster"
            message = (f"Error: projects/{self.p.project}/locations/{self.p.region}/clusters/{self.p.cluster} "
                       f"not found\n\n  with {data},\n  on modules/embedded/modules/management/kubectl-apply/"
                       "main.tf line 163, in data \"google_container_cluster\" \"gke_cluster\":")
            self.say(message)
            raise TerraformFailed(message)
        await self._refresh()
        errors: list[TerraformFailed] = []
        pools_s = 0.0
        for res in reversed(self.resources):
            if res.address not in self.state:
                continue
            users = [r for r in self.resources if res.address in r.deps and r.address in self.state]
            if users:   # something that uses it could not be deleted
                continue
            self.say(f"{res.address}: Destroying... [id={self.cloud.path(res)}]")
            try:
                if res.kind == "kubectl":
                    pass
                elif res.kind == "node_pool":
                    pools_s += await self._delete_pool(res)
                elif res.kind == "cluster":
                    await self._delete_cluster(res)
                    rest = (self.world.clock.seconds("xpk_delete") - self.world.clock.seconds("gke_cluster_delete")
                            - pools_s)
                    await asyncio.sleep(max(0.0, rest))
                else:
                    await self._destroy_compute(res)
            except TerraformFailed as exc:
                errors.append(exc)
                continue
            self.state.drop(res.address)
            self.destroyed += 1
            self.say(f"{res.address}: Destruction complete")
        if errors:
            raise _joined(errors)
        self.say(f"Destroy complete! Resources: {self.destroyed} destroyed.")

    async def _destroy_compute(self, res: Res) -> None:
        try:
            await self._retry(lambda: self.cloud.delete(res), default_retryable, 20 * 60.0)
        except NotFound:
            return
        except CloudError as exc:
            raise self._fail(res, f"Error waiting for Deleting {_noun(res)}", exc.message) from None

    async def _delete_pool(self, res: Res) -> float:
        """Returns the real seconds it took."""
        started = time.monotonic()
        try:
            op = await self._retry(lambda: self.cloud.delete_pool(res.name), busy_retryable, POOL_TIMEOUT_S)
        except NotFound:
            return 0.0
        except CloudError as exc:
            raise self._fail(res, "Error deleting NodePool", exc) from None
        await self._wait_op(op)
        self.state.drop(res.address)
        return time.monotonic() - started

    async def _delete_cluster(self, res: Res) -> None:
        try:
            op = await self._retry(self.cloud.delete_cluster, lambda _exc: True, 30.0)
        except NotFound:
            self.state.drop(res.address)
            return
        except CloudError as exc:
            raise self._fail(res, "Error deleting Cluster", exc) from None
        await self._wait_op(op)
        for r in self.resources:   # its node pools went with it
            if r.kind == "node_pool":
                self.state.drop(r.address)
        self.state.drop(res.address)


def _noun(res: Res) -> str:
    return {"network": "Network", "subnet": "Subnetwork", "firewall": "Firewall", "nat_ip": "Address",
            "router": "Router"}.get(res.kind, res.kind)


def _module_path(module: str) -> str:
    return {"vpc": "network/vpc", "gpu-rdma-vpc": "network/gpu-rdma-vpc", "gke-cluster": "scheduler/gke-cluster",
            "gke-node-pool": "compute/gke-node-pool", "kubectl-apply": "management/kubectl-apply"}.get(module, module)


def _joined(errors: Iterable[TerraformFailed]) -> TerraformFailed:
    return TerraformFailed("\n".join(e.message for e in errors))
