"""A client program as a user would write it outside rltui: official libraries only.

Usage: python outside_client.py STATUS_JSON_FILE
Prints one line per check; exits non-zero at the first surprise.
"""

import json
import os
import subprocess
import sys
import time

import grpc
from google.api_core import exceptions
from google.cloud import compute_v1, container_v1, lustre_v1, monitoring_v3, service_usage_v1
from google.cloud.container_v1.services.cluster_manager.transports import ClusterManagerGrpcTransport
from google.cloud.service_usage_v1.services.service_usage.transports import ServiceUsageGrpcTransport
from google.cloud.lustre_v1.services.lustre.transports import LustreGrpcTransport
from google.cloud.monitoring_v3.services.metric_service.transports import MetricServiceGrpcTransport
from google.api_core import operation as _op  # noqa: F401  (LRO types)
import kubernetes

status = json.load(open(sys.argv[1]))
PROJECT, ZONE = "outside-client-1", "us-east1-b"
PARENT = f"projects/{PROJECT}/locations/{ZONE}"
NETWORK = f"projects/{PROJECT}/global/networks/default"


def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        sys.exit(1)


def refused(what, exc_type, call):
    try:
        call()
    except exc_type as exc:
        check(f"{what} -> {type(exc).__name__}: {exc.message[:80]}", True)
        return
    check(f"{what} was accepted", False)


lustre = lustre_v1.LustreClient(transport=LustreGrpcTransport(
    channel=grpc.insecure_channel(status["grpc"])))

# A fresh project, as Google makes it: Lustre is off until enabled, and says so structurally.
try:
    lustre.list_instances(parent=PARENT)
    check("Lustre answered in a fresh project", False)
except exceptions.PermissionDenied as exc:
    check(f"fresh project -> PermissionDenied {exc.reason}", exc.reason == "SERVICE_DISABLED")
usage = service_usage_v1.ServiceUsageClient(transport=ServiceUsageGrpcTransport(
    channel=grpc.insecure_channel(status["grpc"])))
usage.batch_enable_services(request={"parent": f"projects/{PROJECT}", "service_ids": [
    "lustre.googleapis.com", "compute.googleapis.com", "servicenetworking.googleapis.com",
    "container.googleapis.com"]}).result(timeout=60)
enabled = [s.config.name for s in usage.list_services(request={"parent": f"projects/{PROJECT}",
                                                               "filter": "state:ENABLED"})]
check(f"enabled: {len(enabled)} services incl. lustre", "lustre.googleapis.com" in enabled)
# Private services access on `default` (enabling compute made the network): the codelab's steps.
from google.auth.credentials import AnonymousCredentials  # noqa: E402
addresses = compute_v1.GlobalAddressesClient(client_options={"api_endpoint": status["compute"]},
                                             credentials=AnonymousCredentials())
addresses.insert(project=PROJECT, address_resource=compute_v1.Address(
    name="google-managed-services-default", purpose="VPC_PEERING", address_type="INTERNAL", prefix_length=24,
    network=f"projects/{PROJECT}/global/networks/default"))
for _ in range(600):
    if addresses.get(project=PROJECT, address="google-managed-services-default").status == "RESERVED":
        break
    time.sleep(0.05)
# The real gcloud, pointed at the sandbox as `eval "$(rltui sandbox env)"` would.
out = subprocess.run(["gcloud", "services", "vpc-peerings", "connect", f"--project={PROJECT}",
                      "--service=servicenetworking.googleapis.com", "--network=default",
                      "--ranges=google-managed-services-default"], capture_output=True, text=True, timeout=60,
                     env={**os.environ, **status["tool_env"]})
check(f"peering connect -> {out.returncode}", out.returncode == 0)


def instance(capacity=9000, throughput=1000, filesystem="lustre"):
    return lustre_v1.Instance(capacity_gib=capacity, per_unit_storage_throughput=throughput,
                              filesystem=filesystem, network=NETWORK, labels={"team": "rl"})


op = lustre.create_instance(parent=PARENT, instance_id="outside-lustre", instance=instance())
created = op.result(timeout=60)
check(f"create -> wait: {created.name} {created.state.name} at {created.mount_point}",
      created.state == lustre_v1.Instance.State.ACTIVE and "@tcp:/lustre" in created.mount_point)
names = [i.name for i in lustre.list_instances(parent=f"projects/{PROJECT}/locations/-")]
check(f"list: {names}", created.name in names)
check("labels kept", dict(lustre.get_instance(name=created.name).labels) == {"team": "rl"})
refused("duplicate", exceptions.AlreadyExists,
        lambda: lustre.create_instance(parent=PARENT, instance_id="outside-lustre", instance=instance()))
refused("bad ID", exceptions.InvalidArgument,
        lambda: lustre.create_instance(parent=PARENT, instance_id="Bad_ID", instance=instance()))
refused("bad capacity 9001 at tier 1000", exceptions.InvalidArgument,
        lambda: lustre.create_instance(parent=PARENT, instance_id="cap", instance=instance(9001)))
refused("9000 GiB at tier 500", exceptions.InvalidArgument,
        lambda: lustre.create_instance(parent=PARENT, instance_id="cap2", instance=instance(9000, 500)))
lustre.delete_instance(name=created.name).result(timeout=60)
refused("get after delete", exceptions.NotFound, lambda: lustre.get_instance(name=created.name))

metrics = monitoring_v3.MetricServiceClient(transport=MetricServiceGrpcTransport(
    channel=grpc.insecure_channel(status["grpc"])))
types = [d.type for d in metrics.list_metric_descriptors(request={
    "name": f"projects/{PROJECT}", "filter": 'metric.type = starts_with("lustre.googleapis.com/")'})]
check(f"Lustre metric descriptors: {len(types)}", len(types) >= 3 and all(
    t.startswith("lustre.googleapis.com/") for t in types))

gke = container_v1.ClusterManagerClient(transport=ClusterManagerGrpcTransport(
    channel=grpc.insecure_channel(status["grpc"])))
refused("missing cluster", exceptions.NotFound,
        lambda: gke.get_cluster(name=f"projects/{PROJECT}/locations/us-east1/clusters/nope"))

kubernetes.config.load_kube_config(config_file=status["kubeconfig"])
core = kubernetes.client.CoreV1Api()
pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "outside-pv"},
      "spec": {"capacity": {"storage": "9000Gi"}, "accessModes": ["ReadWriteMany"],
               "csi": {"driver": "lustre.csi.storage.gke.io", "volumeHandle": "p/z/i"}}}
made = core.create_persistent_volume(pv)
check(f"PV created: uid {made.metadata.uid[:8]}", made.metadata.name == "outside-pv")
try:
    core.create_persistent_volume(pv)
    check("duplicate PV accepted", False)
except kubernetes.client.ApiException as exc:
    check(f"duplicate PV -> {exc.status} {exc.reason}", exc.status == 409)
core.delete_persistent_volume("outside-pv")
check("PV deleted", "outside-pv" not in [p.metadata.name for p in core.list_persistent_volume().items])

out = subprocess.run(["kubectl", "--kubeconfig", status["kubeconfig"], "get", "pods"],
                     capture_output=True, text=True, timeout=30)
check(f"kubectl get pods -> {out.returncode}: {(out.stdout + out.stderr).strip()[:60]}",
      out.returncode == 0)
print("all checks passed")
