"""What xpk 1.16.0 leaves in the folder it ran in, and the names its B200 blueprint gives.

On the Cluster Toolkit path (b200-8) `xpk cluster create` writes
`xpkclusters/blueprints/<project>-<region>/<cluster>-<h5>.yaml` (and a folder of that name)
plus Terraform state under `xpkclusters/gcluster-out/`; `cluster delete` deletes the networks
only when it finds that blueprint (xpk src/xpk/commands/cluster_gcluster.py: blueprints_path,
get_unique_name, get_prefix_path, created_by_gcluster). There is no `xpkclusters/<cluster>`.

The a4 blueprint (xpk src/xpk/core/blueprint/blueprint_generator.py, generate_a4_blueprint)
makes `<c>-net-0` (subnet `<c>-sub-0`, firewall `<c>-internal-0`), `<c>-net-1` (`<c>-sub-1`,
`<c>-internal-1`) and `<c>-rdma-net` (subnets `<c>-rdma-sub-0..7`: modules/network/gpu-rdma-vpc,
no firewall rule, no router). net-0 and net-1 are Cluster Toolkit v1.94.0's
modules/network/vpc, whose defaults add to each (main.tf and variables.tf):
- the firewall rules `<net>-fw-allow-internal-traffic` (enable_internal_traffic, default true)
  and `<net>-fw-allow-iap-ingress` (enable_iap_ssh_ingress, default true): main.tf locals,
  lines 101-160;
- a Cloud Router `<net>-router` in the subnet's region (enable_cloud_router, default true;
  main.tf module "cloud_router", lines 257-280) with one NAT `cloud-nat-<region>`
  (enable_cloud_nat, default true) using
- `ips_per_nat` (default 2) regional external addresses `<net>-nat-ips-<region>-<i>`
  (main.tf module "nat_ip_addresses", lines 240-255).
The blueprint proves only that xpk ran in that folder: xpk writes it before it deploys and
never removes it, even when Terraform then fails (the name was taken by someone else's
cluster, say). Whose the cluster is, rltui records itself: when its own `xpk cluster create`
exits 0 (or rltui finds the cluster built after re-attaching to its own xpk), it writes
`rltui-owned.json` beside xpk's files (`record_owned`) with the cluster's GKE Cluster.id, a
unique id ("Output only. Unique id for the cluster": google-cloud-container 2.67.0,
container_v1/types/cluster_service.py line 4914, Cluster.id), so a later same-named cluster is
never taken for it (`owns`). A cluster created after the last xpk create rltui started there
began is that run's too (`made_by_own_create`: one stopped by `down`, or failed after making
it), and is recorded at first sight (XpkClusterStep). A finished teardown removes it (`forget_owned`). No I/O but the
blueprint's `is_file` and the record's read, write and removal.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# The blueprint's names and xpk's deployment name are core knowledge (the limits on them are
# checked before anything runs): rltui/names.py.
from ..names import unique_name


def blueprint_file(xpk_dir: Path, project: str, region: str, cluster: str) -> Path:
    prefix = f"{project}-{region}".lower()
    return Path(xpk_dir) / "xpkclusters" / "blueprints" / prefix / (
        unique_name(project, region, cluster) + ".yaml")


def has_state(xpk_dir: Path, project: str, region: str, cluster: str) -> bool:
    """Would `xpk cluster delete`, run in `xpk_dir`, find this cluster's blueprint (and so
    take the Toolkit path)? Not whose the cluster is: `owns`."""
    return blueprint_file(xpk_dir, project, region, cluster).is_file()


OWNED_FILE = "rltui-owned.json"


@dataclass(frozen=True)
class Owned:
    """The cluster rltui's own xpk made: where, its name, its unique id and creation time."""
    project: str
    region: str
    cluster: str
    cluster_id: str
    create_time: str


def owned_path(xpk_dir: Path) -> Path:
    return Path(xpk_dir) / OWNED_FILE


def record_owned(xpk_dir: Path, project: str, region: str, cluster: str, cluster_id: str,
                 create_time: str) -> Owned:
    """Write the record atomically (rltui/atomic.py: a reader sees the old file or the new)."""
    from ..atomic import write_private

    rec = Owned(project, region, cluster, str(cluster_id), str(create_time))
    Path(xpk_dir).mkdir(parents=True, exist_ok=True)
    write_private(owned_path(xpk_dir), json.dumps(asdict(rec), indent=1) + "\n")
    return rec


def read_owned(xpk_dir: Path, project: str, region: str, cluster: str) -> Owned | None:
    """The record for this project, region and cluster; None when missing, unreadable or
    about another one."""
    try:
        data = json.loads(owned_path(xpk_dir).read_text(encoding="utf-8"))
        rec = Owned(**{k: str(data[k]) for k in Owned.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if (rec.project, rec.region, rec.cluster) != (project, region, cluster) or not rec.cluster_id:
        return None
    return rec


def forget_owned(xpk_dir: Path) -> None:
    owned_path(xpk_dir).unlink(missing_ok=True)


def owns(rec: Owned | None, cluster: Any) -> bool:
    """The cluster (a container.v1 Cluster) is the one the record names, by its unique id."""
    return rec is not None and cluster is not None and bool(rec.cluster_id) and \
        str(getattr(cluster, "id", "") or "") == rec.cluster_id


def own_create_started(xpk_dir: Path) -> float | None:
    """When the last `xpk cluster create` rltui started in `xpk_dir` began (epoch seconds, its
    detached record: cloud/detached.py, which keeps the last run's, live or ended), or None
    when the last run there was not a create (or none is known)."""
    from ..cloud.detached import Detached

    rec = Detached(Path(xpk_dir), "xpk").read()
    return rec.started_at if rec is not None and rec.verb == "create" else None


def made_by_own_create(xpk_dir: Path, created: str) -> bool:
    """Something of the blueprint's, created at `created` (RFC 3339, as GKE's
    Cluster.create_time and compute's creationTimestamp give it), was made by the last xpk
    create rltui started here: it did not exist before that run began. What that run's
    Terraform made when it was stopped (down during a create) or failed after making it; a
    cluster of the same name that existed before it (the name was taken: Terraform then
    fails with 409) is older. xpk makes the networks first, minutes before the cluster, so
    no allowance for clock skew is needed (or taken: a resource made just before the run
    must not pass). Not proof against someone creating the same name while the run makes
    its networks (Terraform then fails with 409): a window of minutes, not otherwise told."""
    started = own_create_started(xpk_dir)
    return started is not None and bool(created) and epoch(created) >= started


def epoch(rfc3339: str) -> float:
    """RFC 3339 ("2026-12-01T09:00:00.123456789Z", "...-08:00") as epoch seconds; 0 if unset."""
    import datetime
    import re

    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?$",
                 str(rfc3339 or ""))
    if m is None:
        return 0.0
    stamp = datetime.datetime.fromisoformat(m[1] + (m[3] or "Z").replace("Z", "+00:00"))
    return stamp.timestamp() + float(m[2] or 0)
