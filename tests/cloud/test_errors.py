"""What an error is comes from its ErrorInfo reason, not its wording (cloud/errors.py)."""

from __future__ import annotations

import pytest
from google.api_core import exceptions as gexc
from google.rpc import error_details_pb2

from rltui.cloud.errors import api_disabled, classify


def info(reason: str, **metadata: str) -> error_details_pb2.ErrorInfo:
    return error_details_pb2.ErrorInfo(reason=reason, domain="googleapis.com", metadata=metadata)


@pytest.mark.parametrize("wording", [
    # Both of GKE's wordings of one refusal (kubernetes-sigs/cluster-api-provider-gcp 1363,
    # rancher/gke-operator 509).
    "Operation operation-1764580000000-abc is currently upgrading cluster ray-a4-gpu-spot."
    " Please wait and try again once it is done.",
    "Cluster is running incompatible operation operation-1764580000000-abc.",
])
def test_a_busy_cluster_is_retried_whatever_the_wording(wording):
    exc = gexc.FailedPrecondition(wording, error_info=info("CLUSTER_ALREADY_HAS_OPERATION"))
    err = classify(exc, "enable addons")
    assert err.transient and err.code == "ClusterBusy"


def test_a_failed_precondition_without_the_busy_reason_is_final():
    err = classify(gexc.FailedPrecondition("Cluster is running incompatible operation x"))
    assert not err.transient


def test_a_disabled_api_names_the_api_from_metadata():
    exc = gexc.PermissionDenied(
        "Managed Lustre API has not been used in project 123 before or it is disabled.",
        error_info=info("SERVICE_DISABLED", service="lustre.googleapis.com",
                        consumer="projects/123"))
    err = classify(exc)
    assert api_disabled(exc) and not err.transient and err.code == "ApiDisabled"
    assert "gcloud services enable lustre.googleapis.com" in err.message


def test_a_rate_limit_passes_and_a_quota_does_not():
    rate = gexc.ResourceExhausted("slow down", error_info=info("RATE_LIMIT_EXCEEDED"))
    quota = gexc.ResourceExhausted("Quota 'NVIDIA_B200_GPUS' exceeded. Limit: 0.0 in region"
                                   " us-east1.", error_info=info("QUOTA_EXCEEDED"))
    assert classify(rate).transient
    assert not classify(quota).transient and classify(quota).code == "QuotaExceeded"


def test_missing_credentials_are_one_line_with_the_fix():
    from google.auth.exceptions import DefaultCredentialsError

    err = classify(DefaultCredentialsError("Your default credentials were not found."))
    assert err.code == "NoCredentials" and "gcloud auth application-default login" in err.message


def _compute_400(reason: str, message: str) -> gexc.GoogleAPICallError:
    """A Compute Engine REST 400 as google-api-core builds it from the response body
    (format_http_response_error: `error.errors[]` becomes `exc.errors`)."""
    import requests

    body = {"error": {"code": 400, "message": message,
                      "errors": [{"message": message, "domain": "global", "reason": reason}]}}
    response = requests.Response()
    response.status_code = 400
    response._content = __import__("json").dumps(body).encode()
    response.request = requests.Request("POST", "https://compute.googleapis.com/compute/v1/x").prepare()
    return gexc.from_http_response(response)


@pytest.mark.parametrize("message", [
    "The resource 'projects/p/global/networks/ray-a4-net-0' is not ready",
    # whatever the wording: the reason decides (terraform-provider-google retries it by default)
    "Something else entirely",
])
def test_computes_resource_not_ready_is_retried(message):
    exc = _compute_400("resourceNotReady", message)
    assert isinstance(exc, gexc.BadRequest)
    err = classify(exc, "create address")
    assert err.transient and err.code == "ResourceNotReady"


def test_another_compute_400_stays_final_even_when_its_text_says_not_ready():
    exc = _compute_400("invalid", "The resource 'projects/p/global/networks/n' is not ready")
    assert not classify(exc).transient
