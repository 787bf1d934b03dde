"""Which Google APIs a sandbox project has on, and how a call to one that is off is refused.

Sources (read 2026-12-01; nothing here was run against a live project):

- The default-enabled set of a new project: "Services enabled by default" in
  https://docs.cloud.google.com/service-usage/docs/enabled-service ("When you create a Google Cloud
  project using the Google Cloud console or Google Cloud CLI, the following APIs and services are
  enabled by default"). It names Cloud Monitoring API, so monitoring.googleapis.com is ON in a
  fresh project; compute, container, lustre and servicenetworking are not on it.
- The refusal: gRPC PERMISSION_DENIED / HTTP 403 `"status": "PERMISSION_DENIED"` with a
  google.rpc.ErrorInfo `reason: SERVICE_DISABLED`, `domain: googleapis.com` and metadata
  `service`, `consumer`, `serviceTitle`, `containerInfo`, `activationUrl`
  (google-gemini/gemini-cli issue 1343, the full JSON). The message, word for word:
  "<Title> has not been used in project <number> before or it is disabled. Enable it by visiting
  https://console.developers.google.com/apis/api/<api>/overview?project=<number> then retry. If you
  enabled this API recently, wait a few minutes for the action to propagate to our systems and
  retry." (googleapis/google-api-nodejs-client 2873, taylorwilsdon/google_workspace_mcp 126,
  fog/fog 3996 and midl-dev/tezos-on-gke 34 for the Compute Engine API with a project NUMBER).
  Compute's own `errors[]` entry carries reason `accessNotConfigured` (fog/fog 3996, terraform's
  "..., accessNotConfigured" suffix in GoogleCloudPlatform/community 884); its `domain`
  "usageLimits" is NOT verified from a source here.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from rltui_sandbox.grpc_util import PermissionDenied

COMPUTE = "compute.googleapis.com"
CONTAINER = "container.googleapis.com"
LUSTRE = "lustre.googleapis.com"
SERVICE_NETWORKING = "servicenetworking.googleapis.com"
MONITORING = "monitoring.googleapis.com"
SERVICE_USAGE = "serviceusage.googleapis.com"

# The codelab's four (its step 2), all off in a fresh project.
CODELAB_APIS = (CONTAINER, LUSTRE, COMPUTE, SERVICE_NETWORKING)

# docs.cloud.google.com/service-usage/docs/enabled-service, "Services enabled by default"
# (English list of 20 names; endpoints from the same page's table in its localized versions).
DEFAULT_ENABLED = frozenset({
    "analyticshub.googleapis.com", "bigquery.googleapis.com", "bigqueryconnection.googleapis.com",
    "bigquerydatapolicy.googleapis.com", "bigquerymigration.googleapis.com",
    "bigqueryreservation.googleapis.com", "bigquerystorage.googleapis.com", "datastore.googleapis.com",
    "dataform.googleapis.com", "dataplex.googleapis.com", "logging.googleapis.com", MONITORING,
    "sql-component.googleapis.com", "storage-component.googleapis.com", "storage.googleapis.com",
    "cloudtrace.googleapis.com", "cloudapis.googleapis.com", "storage-api.googleapis.com",
    "servicemanagement.googleapis.com", SERVICE_USAGE,
})

TITLES = {
    COMPUTE: "Compute Engine API",  # fog/fog 3996
    CONTAINER: "Kubernetes Engine API",  # banzaicloud/cloudinfo 378
    LUSTRE: "Google Cloud Managed Lustre API",  # not verified: the console's title for lustre.googleapis.com
    SERVICE_NETWORKING: "Service Networking API",
    MONITORING: "Cloud Monitoring API",  # the default-enabled list above
    SERVICE_USAGE: "Service Usage API",  # GoogleCloudPlatform/community 884
    "logging.googleapis.com": "Cloud Logging API",
    "storage.googleapis.com": "Cloud Storage API",
    "bigquery.googleapis.com": "BigQuery API",
    "cloudresourcemanager.googleapis.com": "Cloud Resource Manager API",
}

# gRPC service (full proto name) -> the API whose enablement it needs. google.longrunning.Operations
# is shared by several APIs and is not gated (its names carry no API).
GRPC_SERVICE_APIS = {
    "google.cloud.lustre.v1.Lustre": LUSTRE,
    "google.container.v1.ClusterManager": CONTAINER,
    "google.monitoring.v3.MetricService": MONITORING,
    "google.api.serviceusage.v1.ServiceUsage": SERVICE_USAGE,
}

_API_NAME = re.compile(r"^[a-z0-9-]+(\.[a-z0-9-]+)*\.googleapis\.com$")
_PROJECT_IN = re.compile(r"^projects/(?P<project>[^/]+)")


def title(api: str) -> str:
    return TITLES.get(api, api)


def valid_api_name(name: str) -> bool:
    return bool(_API_NAME.match(name or ""))


def disabled_message(api: str, number: int) -> str:
    return (f"{title(api)} has not been used in project {number} before or it is disabled. Enable it by visiting "
            f"https://console.developers.google.com/apis/api/{api}/overview?project={number} then retry. If you "
            "enabled this API recently, wait a few minutes for the action to propagate to our systems and retry.")


def service_disabled(api: str, project: str, number: int) -> PermissionDenied:
    """The refusal Google answers a call to a disabled API with (see the module docstring)."""
    return PermissionDenied(disabled_message(api, number), reason="SERVICE_DISABLED", domain="googleapis.com",
                            metadata={"service": api, "consumer": f"projects/{number}", "serviceTitle": title(api),
                                      "containerInfo": str(number),
                                      "activationUrl": f"https://console.developers.google.com/apis/api/{api}"
                                                       f"/overview?project={number}"})


def project_of_request(request: Any) -> str | None:
    """The project a gRPC request is about: `name`/`parent` ('projects/P/...') or `project_id`."""
    for field in ("name", "parent"):
        value = getattr(request, field, None)
        if isinstance(value, str):
            match = _PROJECT_IN.match(value)
            if match:
                return match["project"]
    value = getattr(request, "project_id", None)
    return value if isinstance(value, str) and value else None


def project_of_args(args: Mapping[str, Any]) -> str | None:
    value = args.get("project")
    return value if isinstance(value, str) and value else None
