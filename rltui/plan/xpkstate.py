"""What xpk 1.16.0 leaves in the folder it ran in, and the names its B200 blueprint gives.

On the Cluster Toolkit path (b200-8) `xpk cluster create` writes
`xpkclusters/blueprints/<project>-<region>/<cluster>-<h5>.yaml` (and a folder of that name)
plus Terraform state under `xpkclusters/gcluster-out/`; `cluster delete` deletes the networks
only when it finds that blueprint (xpk src/xpk/commands/cluster_gcluster.py: blueprints_path,
get_unique_name, get_prefix_path, created_by_gcluster). There is no `xpkclusters/<cluster>`.

The a4 blueprint (xpk src/xpk/core/blueprint/blueprint_generator.py, generate_a4_blueprint)
makes `<c>-net-0` (subnet `<c>-sub-0`, firewall `<c>-internal-0`), `<c>-net-1` (`<c>-sub-1`,
`<c>-internal-1`) and `<c>-rdma-net` (subnets `<c>-rdma-sub-0..7`). Pure: no I/O but `exists`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

_CHARSET = "0123456789abcdefghijklmnopqrstuvwxyz"
RDMA_SUBNETS = 8


def hash_string(text: str, length: int) -> str:
    """xpk's utils/objects.py hash_string: the sha256 as a number, its last `length` base-36
    digits (0-9a-z), zero-padded."""
    value = int(hashlib.sha256(text.encode()).hexdigest(), 16)
    digits = ""
    while value > 0 and len(digits) < length:
        value, index = divmod(value, 36)
        digits = _CHARSET[index] + digits
    return digits.zfill(length).lower()


def unique_name(project: str, region: str, cluster: str) -> str:
    return f"{cluster}-{hash_string(f'{project}-{region}-{cluster}'.lower(), 5)}"


def blueprint_file(xpk_dir: Path, project: str, region: str, cluster: str) -> Path:
    prefix = f"{project}-{region}".lower()
    return Path(xpk_dir) / "xpkclusters" / "blueprints" / prefix / (
        unique_name(project, region, cluster) + ".yaml")


def has_state(xpk_dir: Path, project: str, region: str, cluster: str) -> bool:
    """Would `xpk cluster delete`, run in `xpk_dir`, find this cluster's blueprint?"""
    return blueprint_file(xpk_dir, project, region, cluster).is_file()


@dataclass(frozen=True)
class BlueprintNames:
    networks: tuple[str, ...]
    subnets: tuple[str, ...]
    firewalls: tuple[str, ...]


def blueprint_names(cluster: str) -> BlueprintNames:
    return BlueprintNames(
        networks=(f"{cluster}-net-0", f"{cluster}-net-1", f"{cluster}-rdma-net"),
        subnets=(f"{cluster}-sub-0", f"{cluster}-sub-1",
                 *(f"{cluster}-rdma-sub-{i}" for i in range(RDMA_SUBNETS))),
        firewalls=(f"{cluster}-internal-0", f"{cluster}-internal-1"))
