"""Cluster Toolkit's Terraform, as `xpk cluster create/delete` runs it on the b200-8 path.

xpk 1.16.0 does not create a B200 cluster itself: it writes an a4 blueprint and runs
`gcluster deploy` (or `gcluster destroy`), which runs Terraform with the Toolkit's modules at
v1.94.0 and terraform-provider-google(-beta) >= 7.20.0. The sandbox's fake xpk hands that work to
this package, which makes each of the blueprint's resources through the World's own methods (the
ones its Compute REST and GKE surfaces call, so GKE's busy rule, GCE's in-use refusals and the
quota failures apply to Terraform as to any other caller), under Terraform's user agent, keeping
a Terraform state per deployment:

  blueprint   the a4 blueprint's resources, their names, arguments and dependencies
  terraform   apply and destroy: refresh, create, update, replace what is tainted, the
              provider's retry predicates per call, the data sources destroy reads first

Sources (read at these versions; cited again where each behaviour is imitated):
  AI-Hypercomputer/xpk (pins toolkit v1.94.0): src/xpk/core/blueprint/blueprint_generator.py
    generate_a4_blueprint; src/xpk/core/blueprint/testing/data/a4.yaml (a rendered blueprint);
    src/xpk/commands/cluster_gcluster.py
  GoogleCloudPlatform/cluster-toolkit v1.94.0: modules/network/vpc, modules/network/gpu-rdma-vpc,
    modules/scheduler/gke-cluster, modules/compute/gke-node-pool, modules/management/kubectl-apply
  hashicorp/terraform-provider-google v7.40.0: google/services/container/
    resource_container_cluster.go, resource_container_node_pool.go,
    data_source_google_container_cluster.go; google/transport/error_retry_predicates.go,
    retry_utils.go, config.go; google/tpgresource/utils.go
"""
