"""Failures of cloud calls, sorted into "try again" and "here is what to do".

Transient: UNAVAILABLE, RESOURCE_EXHAUSTED (rate), DEADLINE_EXCEEDED, ABORTED, 429 and 5xx,
connection errors, and a GKE cluster busy with another operation. Everything else is
permanent and becomes one line saying what to do.
"""

from __future__ import annotations

import asyncio
import random
import re
from typing import Awaitable, Callable, TypeVar

T = TypeVar("T")

BUSY_CLUSTER = re.compile(r"currently (updating|creating|deleting|upgrading)|Please wait and try again",
                          re.IGNORECASE)
API_DISABLED = re.compile(r"([a-z]+\.googleapis\.com)[^.]*?(has not been used|is disabled|SERVICE_DISABLED)"
                          r"|SERVICE_DISABLED.*?([a-z]+\.googleapis\.com)", re.IGNORECASE | re.DOTALL)
QUOTA = re.compile(r"quota|Quota '([A-Z_0-9]+)'", re.IGNORECASE)


class CloudError(Exception):
    """A failed cloud call, with what to do about it. Never carries a secret."""

    def __init__(self, message: str, *, transient: bool, code: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient
        self.code = code


def _status_code(exc: BaseException) -> int | None:
    for attr in ("status", "code", "status_code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    return None


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
        gexc = None
    if gexc is not None and isinstance(exc, gexc.GoogleAPICallError):
        if isinstance(exc, (gexc.ServiceUnavailable, gexc.DeadlineExceeded, gexc.Aborted,
                            gexc.InternalServerError, gexc.TooManyRequests, gexc.BadGateway,
                            gexc.GatewayTimeout, gexc.Unknown)):
            return CloudError(prefix + text, transient=True, code=name)
        if isinstance(exc, gexc.ResourceExhausted):
            if QUOTA.search(text) and "rate" not in text.lower():
                return CloudError(prefix + f"{text}: request more quota in the console"
                                  " (IAM & Admin > Quotas) or use a smaller setup",
                                  transient=False, code=name)
            return CloudError(prefix + text, transient=True, code=name)
        if isinstance(exc, gexc.FailedPrecondition) and BUSY_CLUSTER.search(text):
            return CloudError(prefix + text, transient=True, code="ClusterBusy")
        m = API_DISABLED.search(text)
        if m:
            api = m.group(1) or m.group(3)
            return CloudError(prefix + f"the {api} API is not enabled: run `gcloud services"
                              f" enable {api}`", transient=False, code="ApiDisabled")
        if isinstance(exc, (gexc.PermissionDenied, gexc.Forbidden)):
            return CloudError(prefix + f"{text}: check `gcloud auth list` and that your account"
                              " has the role for this (e.g. roles/container.admin,"
                              " roles/lustre.admin)", transient=False, code=name)
        if isinstance(exc, (gexc.Unauthenticated, gexc.Unauthorized)):
            return CloudError(prefix + "not signed in: run `gcloud auth application-default"
                              " login`", transient=False, code=name)
        return CloudError(prefix + text, transient=False, code=name)
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
            if not err.transient or attempt == attempts:
                raise err from exc
            await asyncio.sleep(rng.uniform(0, min(cap_s, base_s * 2 ** (attempt - 1))))
    raise AssertionError("unreachable")
