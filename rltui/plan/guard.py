"""The budget guard from rltui's side (`rltui submit --down-after gpus`, `--max-cost USD`): what
submit finds, prices and makes before the job goes in, what `status` shows of it, and what
`down` removes. What the guard does on the cluster is in rltui/oncluster/guard.py.

Submit, before anything is submitted (a refusal is one line and exit 2):
- the GPU node pools, from GKE: container.v1 NodePools whose NodeConfig has accelerators, or
  whose machine type is the plan's GPU machine (an A3/A4 machine type comes with its GPUs;
  whether GKE lists them under `accelerators` for xpk's a4 pool was not verified, so either
  one counts);
- one GPU node-hour from the Cloud Billing Catalog through the cost meter (rltui/cost.py
  `gpu_node_hour`, the prices `status` uses);
- Workload Identity Federation on the cluster (Cluster.workloadIdentityConfig.workloadPool,
  `PROJECT.svc.id.goog`): without it the supervisor's pod has no identity of its own;
- the Google service account the guard acts as, `rltui-guard-<hash of the cluster>`
  (manifests_supervisor.guard_account_id), its description starting with rltui's mark
  (plan/ownership.py RULE_MARK): one without the mark is not rltui's and is left alone;
- on the project, that account gets one role, GUARD_ROLE, for the three calls the guard makes:
  nodePools.delete (permission container.clusters.update), operations.get
  (container.operations.get) and clusters.get (container.clusters.get) (GKE's "API
  permissions" reference, cloud.google.com/kubernetes-engine/docs/reference/api-permissions).
  roles/container.clusterAdmin ("Kubernetes Engine Cluster Admin": container.clusters.*,
  nodePools.*, operations.*, no Kubernetes objects; cloud.google.com/iam/docs/roles-permissions/
  container) is the least predefined role that holds container.clusters.update: the Developer
  and Viewer roles lack it, and roles/container.admin adds every Kubernetes object. It can
  also delete the cluster: a custom role could hold just the three permissions, but needs
  iam.roles.create of whoever submits, which the codelab's user may not have;
- the link (both bindings from "Link Kubernetes ServiceAccounts to IAM", GKE's Workload
  Identity Federation guide, cloud.google.com/kubernetes-engine/docs/how-to/workload-identity):
  roles/iam.workloadIdentityUser on the service account for
  `serviceAccount:PROJECT.svc.id.goog[default/rltui-supervisor]`, and the supervisor's KSA
  annotated `iam.gke.io/gcp-service-account: <the account's email>` (manifests_supervisor.py).

spec.json's `guard` then holds the pools, the price, where GKE is and the account's email: no
secret (the guard's token comes from the metadata server, on the cluster).

Down removes the account (only with rltui's mark) and its project binding (only its member:
the role's other members stay). The GPU pools the guard did not delete go with the cluster
(xpk cluster delete); nothing else of the guard is in the cloud.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import manifests_supervisor as ms
from ..cost import gpu_node_hour
from .jobs import Refused
from .ownership import RULE_MARK
from .step import PermanentError

if TYPE_CHECKING:
    from .context import Context

GUARD_ROLE = "roles/container.clusterAdmin"
IMPERSONATE_ROLE = "roles/iam.workloadIdentityUser"
DOWN_AFTER = ("gpus",)  # what --down-after may take: the GPU node pools


def gpu_pools(cluster: Any, machine: str) -> list[str]:
    """The container.v1 Cluster's GPU node pools, by name."""
    return sorted(str(p.name) for p in cluster.node_pools
                  if list(p.config.accelerators) or p.config.machine_type == machine)


def ksa_member(workload_pool: str) -> str:
    """The supervisor's Kubernetes ServiceAccount as an IAM principal (Workload Identity)."""
    return f"serviceAccount:{workload_pool}[{ms.NAMESPACE}/{ms.NAME}]"


def description(cfg: Any) -> str:
    return (f"{RULE_MARK}: the budget guard of GKE cluster {cfg.cluster_name} ({cfg.region}); it"
            f" deletes its GPU node pools (rltui submit --down-after/--max-cost)")


def is_rltuis(account: dict[str, Any] | None) -> bool:
    return account is not None and str(account.get("description") or "").startswith(RULE_MARK)


def hand_delete_account(cfg: Any, email: str) -> str:
    from shlex import join

    return join(["gcloud", "iam", "service-accounts", "delete", email, f"--project={cfg.project_id}", "--quiet"])


async def ensure_account(ctx: Context) -> str:
    """The guard's account with its one role on the project (made when missing); its email.
    PermanentError for an account of that name that is not rltui's."""
    from ..cloud.iam import add_member

    iam, cfg = ctx.iam, ctx.cfg
    account_id = ms.guard_account_id(cfg)
    account = await iam.create_account(account_id, display_name="rltui budget guard",
                                       description=description(cfg))
    email = str(account.get("email") or iam.email(account_id))
    if not is_rltuis(account):
        raise PermanentError(f"service account {email} exists and is not rltui's (its description lacks"
                             f" {RULE_MARK}); to delete it by hand: {hand_delete_account(cfg, email)}")
    await fresh_account_retry(ctx, lambda: iam.change_project_policy(
        lambda policy: add_member(policy, GUARD_ROLE, f"serviceAccount:{email}")))
    return email


async def fresh_account_retry(ctx: Context, call: Any) -> Any:
    """`call()`, tried again while IAM does not know a service account made moments ago: "After
    you create a service account, you might need to wait for 60 seconds or more before you use
    it" (cloud.google.com/iam/docs/service-accounts-create); a policy naming it is refused with
    400 INVALID_ARGUMENT meanwhile. About 90 s of tries (the cloud's seconds)."""
    import asyncio

    from ..cloud.errors import CloudError

    wait = 5.0
    for _ in range(6):
        try:
            return await call()
        except CloudError as exc:
            if exc.code not in ("BadRequest", "InvalidArgument"):
                raise
        await asyncio.sleep(wait * ctx.endpoints.time_scale)
        wait = min(wait * 2, 30.0)
    return await call()


async def prepare_guard(ctx: Context, *, down_after: str | None, max_cost_usd: float | None
                        ) -> tuple[dict[str, Any], str]:
    """spec.json's `guard` and the line submit says of it, once the account exists with its
    role and its link to the supervisor's KSA. Refused (exit 2) when the cluster cannot have
    one: no cluster, no GPU pool, no Workload Identity, no price for --max-cost, an account of
    that name that is not rltui's."""
    from ..cloud.errors import CloudError
    from ..cloud.iam import add_member
    from .inventory import prices

    cfg = ctx.cfg
    flag = "--max-cost" if down_after is None else "--down-after"
    cluster = await ctx.gke.get()
    if cluster is None:
        raise Refused(f"{flag}: GKE cluster {cfg.cluster_name} does not exist: run `rltui up` first")
    pools = gpu_pools(cluster, cfg.device.machine_type)
    if not pools:
        raise Refused(f"{flag}: cluster {cfg.cluster_name} has no GPU node pool, so nothing bills for the"
                      " guard to stop")
    workload_pool = str(cluster.workload_identity_config.workload_pool or "")
    if not workload_pool:
        raise Refused(f"{flag}: cluster {cfg.cluster_name} has no Workload Identity, which the guard acts"
                      f" through: `gcloud container clusters update {cfg.cluster_name} --region={cfg.region}"
                      f" --workload-pool={cfg.project_id}.svc.id.goog`, then submit again")
    # The supervisor runs on a pool neither Spot nor GPU (manifests_supervisor.py); its pod gets
    # a token of its own only where the pool runs GKE's metadata server (NodeConfig
    # workloadMetadataConfig.mode GKE_METADATA: "Link Kubernetes ServiceAccounts to IAM" needs it).
    cpu = [p for p in cluster.node_pools if not p.config.spot and str(p.name) not in pools]
    if cpu and not any(p.config.workload_metadata_config.mode.name == "GKE_METADATA" for p in cpu):
        raise Refused(f"{flag}: node pool {cpu[0].name} runs no GKE metadata server, which the guard's token"
                      f" comes from: `gcloud container node-pools update {cpu[0].name} --cluster={cfg.cluster_name}"
                      f" --region={cfg.region} --workload-metadata=GKE_METADATA`, then submit again")
    rate, currency = None, "USD"
    try:
        unit = await prices(ctx)
        rate, currency = gpu_node_hour(cfg, unit), unit.currency
    except CloudError as exc:
        if max_cost_usd is not None:
            raise Refused(f"--max-cost: the prices could not be read ({exc.message}), so the spend"
                          " cannot be told; try again, or use --down-after gpus alone") from None
    if max_cost_usd is not None and rate is None:
        raise Refused(f"--max-cost: the Cloud Billing Catalog has no price for a {cfg.device.machine_type}"
                      " node-hour, so the spend cannot be told; use --down-after gpus alone")
    if max_cost_usd is not None and rate == 0:
        raise Refused(f"--max-cost: the GPU nodes come from a reservation (CAPACITY={cfg.capacity}), which is"
                      " billed whether they run or not, so no spend of theirs can reach a limit; use"
                      " --down-after gpus, and delete the reservation to stop its bill")
    if max_cost_usd is not None and currency != "USD":
        raise Refused(f"--max-cost: the catalog's prices are in {currency}, not USD")
    if max_cost_usd is not None and rate is not None:
        # The guard counts from the GPU nodes' creation (what they have billed), so a limit the
        # nodes have passed already would stop the job at its first look: said now instead.
        spent = await spent_so_far(ctx, pools, rate)
        if spent >= max_cost_usd:
            raise Refused(f"--max-cost: the GPU nodes have cost ~{fmt_money(spent, currency)} since they were"
                          f" created, more than {fmt_money(max_cost_usd, currency)}: give a higher limit"
                          " (the guard counts from the nodes' creation)")
    try:
        email = await ensure_account(ctx)
    except PermanentError as exc:
        raise Refused(f"{flag}: {exc}") from None
    await fresh_account_retry(ctx, lambda: ctx.iam.change_account_policy(
        email, lambda policy: add_member(policy, IMPERSONATE_ROLE, ksa_member(workload_pool))))
    guard = {"down_after": down_after, "max_cost_usd": max_cost_usd, "gpu_pools": pools,
             "gpu_node_hour_usd": rate, "currency": currency, "project": cfg.project_id,
             "location": cfg.region, "cluster": cfg.cluster_name,
             "container_api": ctx.endpoints.api_url("container"), "time_scale": ctx.endpoints.time_scale,
             "service_account": email}
    return guard, "budget guard: " + plans(guard) + (
        f" (a GPU node-hour ~{fmt_money(rate, currency)}, Cloud Billing Catalog)" if rate is not None else "")


async def spent_so_far(ctx: Context, pools: list[str], rate: float) -> float:
    """What the GPU pools' Nodes have cost since their creation, as the guard counts it."""
    import time

    from ..oncluster.guard import POOL_LABEL, account_nodes, spend

    kube = await ctx.kube()
    nodes = await kube.list("nodes", f"{POOL_LABEL} in ({','.join(sorted(pools))})")
    book: dict[str, Any] = {}
    now = time.time()
    account_nodes(book, list(nodes), pools, now)
    return spend(book, now, ctx.endpoints.time_scale, rate) or 0.0


def fmt_money(amount: float, currency: str = "USD") -> str:
    """"$412", "$0.67": whole dollars from 100 on (an estimate: cents would claim more)."""
    text = f"{amount:,.0f}" if amount >= 100 else f"{amount:,.2f}"
    return f"${text}" if currency == "USD" else f"{text} {currency}"


def _pools(pools: Any) -> str:
    names = sorted(pools)
    return f"GPU {'pool' if len(names) == 1 else 'pools'} {', '.join(names)}"


def plans(guard: dict[str, Any]) -> str:
    """What the guard will do, in a line ("deletes GPU pool np-gpu when the run ends")."""
    pools = _pools(guard.get("gpu_pools") or guard.get("pools") or [])
    limit = guard.get("max_cost_usd", guard.get("limit_usd"))
    currency = str(guard.get("currency") or "USD")
    when = []
    if guard.get("down_after"):
        when.append("when the run ends")
    if limit is not None:
        when.append(f"once ~{fmt_money(float(limit), currency)} is spent (the job stopped first)")
    return f"deletes {pools} " + " or ".join(when)


def guard_line(gs: dict[str, Any]) -> str:
    """The guard's state as `status` and the Monitor show it: "guard: deletes GPU pool np-gpu
    when the run ends; spent ~$412 of $500"; "" without a guard."""
    if not gs:
        return ""
    currency = str(gs.get("currency") or "USD")
    spent = gs.get("spend_usd")
    limit = gs.get("limit_usd")
    money = "spent: no price" if spent is None else f"spent ~{fmt_money(float(spent), currency)}"
    if limit is not None:
        money += f" of {fmt_money(float(limit), currency)}"
    state = gs.get("state")
    pools = _pools(gs.get("pools") or {})
    if state == "done":
        return f"guard: {pools} deleted; {money}"
    if state == "failed":
        return f"guard FAILED: {gs.get('message') or 'it stopped'}; {money}"
    if state == "stopping":
        return f"guard: the budget was reached, stopping the job; {money}"
    if state == "deleting":
        return f"guard: deleting {pools}; {money}" + (f" ({gs['message']})" if gs.get("message") else "")
    return f"guard: {plans(gs)}; {money}"


def guard_short(gs: dict[str, Any]) -> str:
    """guard_line where a narrow Monitor has 43 columns: "guard: ~$412 of $500; GPUs go at end"."""
    if not gs:
        return ""
    currency = str(gs.get("currency") or "USD")
    spent, limit = gs.get("spend_usd"), gs.get("limit_usd")
    money = "no price" if spent is None else f"~{fmt_money(float(spent), currency)}"
    if limit is not None:
        money += f" of {fmt_money(float(limit), currency)}"
    state = gs.get("state")
    doing = {"done": "GPUs deleted", "failed": "FAILED (rltui status)", "stopping": "stopping the job",
             "deleting": "deleting GPUs"}.get(str(state), "GPUs go at end" if gs.get("down_after") else "")
    return f"guard: {money}" + (f"; {doing}" if doing else "")


def guard_pending(gs: dict[str, Any]) -> bool:
    """The guard still has work (the Monitor keeps polling the run while it does)."""
    return bool(gs) and gs.get("state") not in ("done", "failed") and bool(
        gs.get("down_after") or gs.get("limit_usd") is not None)


async def guard_account(ctx: Context) -> tuple[str, dict[str, Any] | None]:
    """(the guard's account email, the account or None): absent too where IAM is off."""
    from ..cloud.errors import CloudError

    iam = ctx.iam
    email = iam.email(ms.guard_account_id(ctx.cfg))
    try:
        return email, await iam.account(email)
    except CloudError as exc:
        if exc.code == "ApiDisabled":  # IAM off: no account can exist
            return email, None
        raise


async def remove_guard_account(ctx: Context, on_line: Any = None) -> bool:
    """Down: the project binding rltui added (only its member), then the account; False when
    there was none. Never one that is not rltui's (the caller keeps it: PermanentError)."""
    from ..cloud.iam import remove_member

    email, account = await guard_account(ctx)
    if account is None:
        return False
    if not is_rltuis(account):
        raise PermanentError(f"service account {email} is not rltui's")
    member = f"serviceAccount:{email}"
    if await ctx.iam.change_project_policy(lambda policy: remove_member(policy, GUARD_ROLE, member)) and on_line:
        on_line(f"removed {member} from {GUARD_ROLE} on project {ctx.cfg.project_id}")
    await ctx.iam.delete_account(email)
    return True


def guard_summary(gs: dict[str, Any]) -> dict[str, Any]:
    """The guard as `status --json`'s job object carries it (its book-keeping left out)."""
    return {"state": gs.get("state"), "spend_usd": gs.get("spend_usd"), "limit_usd": gs.get("limit_usd"),
            "currency": gs.get("currency") or "USD", "down_after": gs.get("down_after"),
            "pools": dict(gs.get("pools") or {}), "message": gs.get("message") or "",
            "line": guard_line(gs), "short": guard_short(gs), "pending": guard_pending(gs)}
