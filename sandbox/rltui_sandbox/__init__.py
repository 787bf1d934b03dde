"""The sandbox: a local emulated project that the official clients cannot tell from the cloud.

It is only as good as its agreement with Google. Each row of sandbox/SOURCES.md (the facts it
imitates, each with its upstream sources; cite a row as `SOURCES.md#<anchor>`) is enforced
here, and the code that enforces it cites the row's own sources:

| SOURCES.md row | enforced in | sources cited there |
|---|---|---|
| gcloud-missing-resource | rest_compute.py (Google's 404 error JSON; the real gcloud prints its two lines itself, tests/gcloud) | kubernetes-the-hard-way #327, #684; gcloud 528 tried against it |
| xpk-state-directory | tools/xpk.py, xpk_names.py, world_xpk.py | xpk 1.16.0 commands/cluster_gcluster.py, core/blueprint/blueprint_generator.py |
| xpk-version | tools/xpk.py; flags in tests/data/xpk_1.16.0_flags.json; its gcloud/kubectl calls, run for real: tools/xpk_gcloud.py, xpk_commands.py | xpk 1.16.0 parser/, core/commands.py, core/gcloud_context.py, core/cluster.py |
| lustre-csi-port | nodes/lustre_csi.py (per-node LNet port), kuberay/volumes.py (the mount) | google-cloud-lustre 0.4.3, google-cloud-container 2.67.0 docstrings; lustre-csi-driver docs/troubleshooting.md; xpk 1.16.0 parser/cluster.py |
| lustre-csi-on-running-cluster | nodes/pools.py (the driver only on nodes registered after enablement), world_gke_pools.py (UpdateNodePool recreation) | xpk core/cluster.py, core/nodepool.py |
| lustre-metrics | grpc_monitoring/ (metrics.py the descriptors, aggregation.py, service.py), lustre_meter.py | docs.cloud.google.com/monitoring/api/metrics_gcp_i_o; managed-lustre/docs/monitoring |
| gke-one-operation-at-a-time | world_gke.py (`_busy`, GKE's own upgrade after create) | cluster-api-provider-gcp 1363, rancher/gke-operator 509, terraform-provider-google 3650, 1643 |
| persistentvolume-source-immutable | kube/kinds.py, kube/store.py (422 on a source change) | kubernetes ValidatePersistentVolumeUpdate |
| servicenetworking-peering-delete | world_network.py (`delete_peering`, `peering_release_lag`, removePeering) | terraform-provider-google 19908, magic-modules 18476 |
| lustre-create-fails-late | world_lustre.py (quota, `lustre:create-late` fault) | lustre_v1 Instance.State and LRO docstrings; cluster-toolkit 5290 |
| rest-shapes-offline | rest_compute.py (compute.v1 discovery document, Google's error JSON) | google-api-python-client 2.202.0 discovery_cache |
| official-clients | grpc_serviceusage.py, world_services.py, rest_compute.py | google-cloud-service-usage 1.18.0, google-cloud-compute 1.57 |
| nemo-rl-image-ray | images.py (images -> the Ray 2.46.0 environment), rayhead.py, kuberay/procpods.py, nemo_rl_tree.py | NeMo-RL v0.4.0 pyproject.toml, uv.lock, docker/Dockerfile |
| kuberay-by-version | kuberay/versions.py (conditions, probes, head service per release), kuberay/probes.py (the kubelet's prober) | ray-project/kuberay tags v1.1.0 to v1.7.0: features.go, common/pod.go, raycluster_controller.go |
| toolkit-system-pool-taint | toolkit/blueprint.py (SYSTEM_POOL_TAINT) | cluster-toolkit v1.94.0 gke-cluster variables.tf system_node_pool_taints |
| toolkit-blueprint-resources | toolkit/blueprint.py, toolkit/resources.py, world_routers.py (networks, routers, Cloud NAT, NAT IPs, pools) | xpk 1.16.0 blueprint_generator.py generate_a4_blueprint; cluster-toolkit v1.94.0 modules/network/vpc, gke-cluster, gke-node-pool |
| toolkit-default-pool-removal, terraform-retries | toolkit/terraform.py (default pool removed right after create; GKE's busy answer not retried), world_gke_pools.py | cluster-toolkit v1.94.0 gke-cluster main.tf; terraform-provider-google v7.40.0 resource_container_cluster.go, error_retry_predicates.go |
| xpk-lustre-csi-flags, xpk-rerun-turns-addons-off | tools/xpk.py, toolkit/resources.py (desired_addons), toolkit/terraform.py (`_update_cluster`) | xpk 1.16.0 blueprint_generator.py, parser/cluster.py; cluster-toolkit v1.94.0 gke-cluster main.tf addons_config, ignore_changes |
| xpk-delete-reads-cluster-first | tools/xpk.py (cluster_delete), tools/xpk_gcloud.py (set_cluster_command), toolkit/terraform.py (destroy's data sources) | xpk 1.16.0 commands/cluster.py, commands/common.py; kubectl-apply and gke-node-pool main.tf |
| spot-preemption | kuberay/preemption.py (graceful shutdown, or a VM gone silently), nodes/pools.py (the node back after spot_replace) | GKE docs Spot VMs and preemptible VMs; kubernetes.io node-shutdown; kube-controller-manager --node-monitor-grace-period |
| secret-volumes | kuberay/secretvolumes.py | kubernetes pkg/volume/secret, atomic_writer.go, pod_workers.go; kubernetes.io Secrets |
| kubectl-port-forward | kube/spdy.py, kube/portforward_spdy.py, kube/portforward.py | kubectl, client-go, apimachinery, apiserver v0.32.4; moby/spdystream v0.5.0; containerd sandbox_portforward.go |
| real-gcloud-offline | rest_util.py, rest_lustre.py, rest_container.py, rest_serviceusage.py, rest_servicenetworking.py, rest_resourcemanager.py; proxy.py (Service Networking, which SDK 528 cannot override); manage.tool_env (`rltui sandbox env`) | gcloud 528 apis_internal.py, tried here; discovery documents in google-api-python-client 2.202.0; lustre_v1 rest_base.py |

The sandbox keeps its own copy of every rule it enforces (rules.py: Lustre tiers, name
formats) and imports nothing from rltui outside sandbox/rltui_sandbox but plumbing (atomic writes,
the latency profile): the import-linter contract in pyproject.toml checks it. What each fake could not
verify is said in its docstring.
"""
