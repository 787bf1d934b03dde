"""Failures of cloud calls, sorted into "try again" and "here is what to do".

Transient: UNAVAILABLE, RESOURCE_EXHAUSTED (rate), DEADLINE_EXCEEDED, ABORTED, 429 and 5xx,
connection errors, a GKE cluster busy with another operation, and Compute Engine's 400 with
reason `resourceNotReady`. Everything else is permanent and becomes one line saying what to do.

resourceNotReady: Compute refuses a change to a network or subnetwork that another change is
still being applied to ("GCE Networks are considered unready for a brief period when certain
operations are performed on them", and the same of subnetworks: terraform-provider-google
v7.40.0 google/transport/error_retry_predicates.go:57-61 and 74-78, isSubnetworkUnreadyError and
isNetworkUnreadyError at 160-184, both in defaultErrorRetryPredicates, i.e. retried by default).
rltui's inserts on xpk's network (the IP range, the Lustre firewall rule) can run while
Terraform still changes it. Compute's REST errors carry that reason in the older `errors[]`
list ({domain, reason, message}), which google-api-core keeps as `exc.errors`
(google/api_core/exceptions.py format_http_response_error); the provider also looks for
"networks" in the body's text, which rltui does not: the reason alone decides.

What an error IS comes from its google.rpc.ErrorInfo reason (google-api-core's `exc.reason`,
`exc.domain`, `exc.error_info.metadata`), never from its wording: GKE words "busy" at least
two ways (`Operation ... is currently ...`, `Cluster is running incompatible operation ...`)
under one reason, CLUSTER_ALREADY_HAS_OPERATION (kubernetes-sigs/cluster-api-provider-gcp #1363,
rancher/gke-operator #509; sandbox/SOURCES.md#gke-one-operation-at-a-time); a disabled API is
reason SERVICE_DISABLED with the API's name in metadata["service"] (AIP-193 and Google's
ErrorInfo reasons for googleapis.com).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..backoff import delay_s

if TYPE_CHECKING:
    from google.api_core.exceptions import GoogleAPICallError

T = TypeVar("T")

BUSY_REASON = "CLUSTER_ALREADY_HAS_OPERATION"
DISABLED_REASON = "SERVICE_DISABLED"
RATE_REASONS = frozenset({"RATE_LIMIT_EXCEEDED"})
NOT_READY_REASON = "resourceNotReady"   # compute's errors[].reason (see the module docstring)


class CloudError(Exception):
    """A failed cloud call, with what to do about it. Never carries a secret."""

    def __init__(self, message: str, *, transient: bool, code: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient
        self.code = code
        # Set by retry() when its attempts ran out on a transient failure: the call's retry
        # budget is spent, so the step above does not retry it again (no nested budgets).
        self.exhausted = False

    def __reduce__(self) -> tuple[Any, ...]:  # keyword-only fields: Exception's pickling drops them
        return (_cloud_error, (self.message, self.transient, self.code, self.exhausted))


def _cloud_error(message: str, transient: bool, code: str, exhausted: bool) -> CloudError:
    err = CloudError(message, transient=transient, code=code)
    err.exhausted = exhausted
    return err


def _status_code(exc: BaseException) -> int | None:
    for attr in ("status", "code", "status_code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    return None


def error_reason(exc: BaseException) -> tuple[str, dict[str, str]]:
    """(ErrorInfo reason, its metadata) of a google-api-core error; ("", {}) when it has none."""
    reason = getattr(exc, "reason", None)
    metadata = getattr(exc, "metadata", None)
    if not isinstance(reason, str):
        return "", {}
    return reason, dict(metadata) if metadata is not None and hasattr(metadata, "items") else {}


def legacy_reasons(exc: BaseException) -> list[str]:
    """The `reason` of each entry of a REST error's older `errors[]` list (google-api-core's
    `exc.errors`: the dicts as the JSON had them); [] when there is none."""
    out = []
    for item in getattr(exc, "errors", None) or ():
        reason = item.get("reason") if isinstance(item, dict) else None
        if isinstance(reason, str):
            out.append(reason)
    return out


def api_disabled(exc: BaseException) -> bool:
    """A refusal because the API is off (reason SERVICE_DISABLED): nothing of it can exist."""
    return error_reason(exc)[0] == DISABLED_REASON


def _google_error(exc: GoogleAPICallError, prefix: str, text: str, name: str) -> CloudError:
    """`classify` for google-api-core's errors: by class and ErrorInfo reason."""
    from google.api_core import exceptions as gexc

    reason, metadata = error_reason(exc)
    if isinstance(exc, (gexc.ServiceUnavailable, gexc.DeadlineExceeded, gexc.Aborted,
                        gexc.InternalServerError, gexc.BadGateway, gexc.GatewayTimeout,
                        gexc.Unknown)) or (isinstance(exc, gexc.TooManyRequests)
                                           and not isinstance(exc, gexc.ResourceExhausted)):
        return CloudError(prefix + text, transient=True, code=name)
    if reason == BUSY_REASON:
        return CloudError(prefix + text, transient=True, code="ClusterBusy")
    if isinstance(exc, gexc.BadRequest) and NOT_READY_REASON in legacy_reasons(exc):
        return CloudError(prefix + text, transient=True, code="ResourceNotReady")
    if reason == DISABLED_REASON:
        api = metadata.get("service", "the")
        return CloudError(prefix + f"the {api} API is not enabled: run `gcloud services"
                          f" enable {api}`", transient=False, code="ApiDisabled")
    if isinstance(exc, gexc.ResourceExhausted):
        # A rate limit (or no reason at all) passes; a quota reason does not.
        if not reason or reason in RATE_REASONS:
            return CloudError(prefix + text, transient=True, code=name)
        return CloudError(prefix + f"{text}: request more quota in the console"
                          " (IAM & Admin > Quotas) or use a smaller setup",
                          transient=False, code="QuotaExceeded")
    if isinstance(exc, (gexc.PermissionDenied, gexc.Forbidden)):
        return CloudError(prefix + f"{text}: check `gcloud auth list` and that your account"
                          " has the role for this (e.g. roles/container.admin,"
                          " roles/lustre.admin)", transient=False, code=name)
    if isinstance(exc, (gexc.Unauthenticated, gexc.Unauthorized)):
        return CloudError(prefix + "not signed in: run `gcloud auth application-default"
                          " login`", transient=False, code=name)
    return CloudError(prefix + text, transient=False, code=name)


def classify(exc: BaseException, what: str = "") -> CloudError:
    """Turn any client exception into a CloudError (transient or with advice)."""
    if isinstance(exc, CloudError):
        return exc
    prefix = f"{what}: " if what else ""
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    text = str(text).strip().splitlines()[0][:500]
    name = type(exc).__name__
    try:
        from google.api_core import exceptions as gexc
    except ImportError:  # pragma: no cover - google libraries are a dependency
        pass
    else:
        if isinstance(exc, gexc.GoogleAPICallError):
            return _google_error(exc, prefix, text, name)
    try:
        from google.auth import exceptions as aexc
    except ImportError:  # pragma: no cover
        pass
    else:
        if isinstance(exc, (aexc.DefaultCredentialsError, aexc.RefreshError)):
            return CloudError(prefix + "no usable Application Default Credentials: run `gcloud auth"
                              " application-default login`, then try again", transient=False,
                              code="NoCredentials")
    status = _status_code(exc)
    if name == "ApiException" and status is not None:  # kubernetes
        if status == 429 or status >= 500:
            return CloudError(prefix + f"Kubernetes API {status}: {getattr(exc, 'reason', '')}",
                              transient=True, code=str(status))
        if status in (401, 403):
            return CloudError(prefix + f"Kubernetes API {status}: refresh credentials with"
                              " `gcloud container clusters get-credentials`", transient=False,
                              code=str(status))
        return CloudError(prefix + f"Kubernetes API {status}: {getattr(exc, 'reason', '')}",
                          transient=False, code=str(status))
    if isinstance(exc, (ConnectionError, TimeoutError, asyncio.TimeoutError, OSError)):
        return CloudError(prefix + f"connection problem: {text}", transient=True, code=name)
    module = type(exc).__module__
    if module.startswith(("urllib3", "requests", "aiohttp", "websocket")):
        return CloudError(prefix + f"connection problem: {text}", transient=True, code=name)
    return CloudError(prefix + f"{name}: {text}", transient=False, code=name)


async def retry(call: Callable[[], Awaitable[T]], *, what: str, attempts: int = 6,
                base_s: float = 0.5, cap_s: float = 20.0, timeout_s: float | None = 60.0,
                rng: random.Random | None = None) -> T:
    """Await `call()` with a per-attempt timeout; retry transient failures (full jitter)."""
    rng = rng or random.Random()
    for attempt in range(1, attempts + 1):
        try:
            if timeout_s is None:
                return await call()
            return await asyncio.wait_for(call(), timeout_s)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified below
            err = classify(exc, what)
            if not err.transient or err.exhausted or attempt == attempts:
                err.exhausted = err.transient
                raise err from exc
            await asyncio.sleep(delay_s(attempt, base_s, cap_s, rng))
    raise AssertionError("unreachable")
