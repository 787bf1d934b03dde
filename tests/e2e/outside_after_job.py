"""A program outside rltui, official clients and the status JSON only, run after a training
job: what an engineer checking rltui's work in the sandbox would write.

Usage: python outside_after_job.py STATUS_JSON PROJECT ZONE INSTANCE CLUSTER PV_NAME
Prints one line per check; exits non-zero at the first surprise.
"""

import json
import sys
import time

import grpc
import kubernetes
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1, monitoring_v3, service_usage_v1
from google.cloud.monitoring_v3.services.metric_service.transports import MetricServiceGrpcTransport
from google.cloud.service_usage_v1.services.service_usage.transports import ServiceUsageGrpcTransport

status = json.load(open(sys.argv[1]))
PROJECT, ZONE, INSTANCE, CLUSTER, PV = sys.argv[2:7]
BASE = "lustre.googleapis.com/instance/"


def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        sys.exit(1)


channel = grpc.insecure_channel(status["grpc"])
usage = service_usage_v1.ServiceUsageClient(transport=ServiceUsageGrpcTransport(channel=channel))
enabled = {s.config.name for s in usage.list_services(
    request={"parent": f"projects/{PROJECT}", "filter": "state:ENABLED"})}
wanted = {"container.googleapis.com", "lustre.googleapis.com", "compute.googleapis.com",
          "servicenetworking.googleapis.com"}
check(f"the four APIs are enabled: {sorted(wanted & enabled)}", wanted <= enabled)

networks = compute_v1.NetworksClient(credentials=AnonymousCredentials(),
                                     client_options={"api_endpoint": status["compute"]})
names = {n.name for n in networks.list(project=PROJECT)}
mine = {f"{CLUSTER}-net-0", f"{CLUSTER}-net-1", f"{CLUSTER}-rdma-net"}
check(f"the cluster's networks: {sorted(names & mine)}", mine <= names)

metrics = monitoring_v3.MetricServiceClient(transport=MetricServiceGrpcTransport(channel=channel))
types = {d.type for d in metrics.list_metric_descriptors(request={
    "name": f"projects/{PROJECT}", "filter": 'metric.type = starts_with("lustre.googleapis.com/")'})}
real = {BASE + t for t in ("read_bytes_total", "write_bytes_total", "capacity_bytes",
                           "free_bytes", "available_bytes")}
check(f"the documented Lustre metric types ({len(types)})", real <= types)
check("no invented 'used' metric", not [t for t in types if "used" in t])

now = time.time()
interval = monitoring_v3.TimeInterval(end_time={"seconds": int(now) + 1},
                                      start_time={"seconds": int(now) - 3 * 3600})
flt = (f'metric.type = "{BASE}write_bytes_total" AND resource.type = "lustre.googleapis.com/Instance"'
       f' AND resource.labels.instance_id = "{INSTANCE}"')
period = max(1, int(round(60 / float(status["speed"]))))
per_target = list(metrics.list_time_series(request={
    "name": f"projects/{PROJECT}", "filter": flt, "interval": interval,
    "aggregation": {"alignment_period": {"seconds": period},
                    "per_series_aligner": monitoring_v3.Aggregation.Aligner.ALIGN_RATE}}))
targets = {ts.metric.labels["target"] for ts in per_target}
check(f"one write series per storage target: {sorted(targets)}",
      len(per_target) == len(targets) >= 2 and all("OST" in t for t in targets))
summed = list(metrics.list_time_series(request={
    "name": f"projects/{PROJECT}", "filter": flt, "interval": interval,
    "aggregation": {"alignment_period": {"seconds": period},
                    "per_series_aligner": monitoring_v3.Aggregation.Aligner.ALIGN_RATE,
                    "cross_series_reducer": monitoring_v3.Aggregation.Reducer.REDUCE_SUM}}))
peak = max((p.value.double_value for ts in summed for p in ts.points), default=0.0)
check(f"REDUCE_SUM gives one series, peak write {peak / 1e6:.1f} MB/s", len(summed) == 1 and peak > 0)

kubernetes.config.load_kube_config(config_file=status["kubeconfig"])
core = kubernetes.client.CoreV1Api()
try:
    core.patch_persistent_volume(PV, {"spec": {"csi": {"volumeAttributes": {"ip": "10.9.9.9"}}}})
    check("a PV source patch was accepted", False)
except kubernetes.client.ApiException as exc:
    check(f"a PV source patch -> {exc.status} (immutable)", exc.status == 422)
print("all checks passed")
