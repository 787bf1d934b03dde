"""Only Spot VMs are preempted: on a cluster whose GPU pool is on demand (CAPACITY=on-demand, xpk's
--on-demand) the sandbox's preemption finds no node to take and says why (404, one line)."""

from __future__ import annotations

import pytest
from kubernetes import client

pytestmark = [pytest.mark.timeout(60, func_only=True)]


def test_an_on_demand_gpu_node_is_never_preempted(make_box, tools) -> None:
    box = make_box()
    cfg = tools.config()
    box.call(box.world.xpk_cluster_create(tools.project, cfg.zone, cfg.cluster_name, num_nodes=cfg.num_nodes, spot=False,
                                          default_pool_cpu_machine_type="e2-standard-4",
                                          default_pool_cpu_num_nodes=1), timeout=30)
    core = client.CoreV1Api(box.api())
    tools.wait_for(lambda: any("cloud.google.com/gke-accelerator" in n.metadata.labels
                               for n in core.list_node().items), 10, "the GPU nodes")
    code, body = box.post_preempt({})
    assert code == 404, body
    assert body["message"].startswith("no Spot GPU node: Compute Engine preempts only Spot VMs")
