"""Where each API lives and how to authenticate: the single switch between Google and the sandbox.

Real: Google's hosts with Application Default Credentials. Sandbox: `127.0.0.1` ports with
insecure channels (gRPC) or plain http (compute's REST surface, anonymous credentials), an ADC
file whose token endpoint is the sandbox's, the sandbox's xpk first on PATH, and an environment
that points the real gcloud and kubectl at the sandbox.

The Kubernetes client is built the same way in both: from the GKE cluster's `endpoint` and
`master_auth.cluster_ca_certificate` (which the sandbox's World fills with its HTTPS address and
CA) and a bearer token from `credentials()`. Nothing else in rltui asks which one it is; it asks
this value for clients.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import grpc

# Per-call deadline for unary Google calls (the clients have none by default).
CALL_TIMEOUT_S = 30.0
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
_CREDENTIALS_LOCK = threading.Lock()


def user_agent() -> str:
    """How rltui names itself to Google, as gcloud (`gcloud/528.0.0 command/...`), Terraform
    (`Terraform/1.x ... terraform-provider-google/7.x`) and xpk's gcloud calls do: Cloud Audit
    Logs keep it as requestMetadata.callerSuppliedUserAgent, so an operator can tell rltui's
    operations from the other actors' in a shared project."""
    from .. import __version__

    return f"rltui/{__version__}"


def client_info() -> Any:
    """The Google client libraries' ClientInfo with rltui's user agent (google-api-core
    gapic_v1/client_info.py: user_agent goes first in the x-goog-api-client header, and into the
    REST transports' User-Agent)."""
    from google.api_core.gapic_v1.client_info import ClientInfo

    return ClientInfo(user_agent=user_agent())  # type: ignore[no-untyped-call]


@dataclass(frozen=True)
class Endpoints:
    label: str                         # shown in the header badge: "SANDBOX" or "Google Cloud"
    grpc_target: str | None = None     # "127.0.0.1:PORT" (insecure); None: Google's hosts + ADC
    compute_url: str | None = None     # "http://127.0.0.1:PORT" (REST); None: compute.googleapis.com
    adc_file: Path | None = None       # an ADC JSON file; None: google.auth.default()
    # REST base URLs by API name ("servicenetworking", "cloudresourcemanager", ...); absent:
    # https://<name>.googleapis.com/
    rest: Mapping[str, str] = field(default_factory=dict)
    tool_dirs: tuple[Path, ...] = ()   # put first on PATH for xpk and gcloud
    tool_env: Mapping[str, str] = field(default_factory=dict)  # e.g. a private KUBECONFIG
    default_project: str | None = None
    # Real seconds per reference second: 1 for Google; 1/speed for a sandbox running faster.
    # Expected durations, poll intervals and timeouts scale with it.
    time_scale: float = 1.0
    # Whether the job downloads the model from Hugging Face (so submitting needs HF_TOKEN).
    downloads_models: bool = True
    # Credentials by scopes and ADC file version, loaded once: parsing the sandbox's key or
    # asking google.auth.default() again on every call cost a noticeable time each call
    # (docs/decisions/import-cost.md); the object kept refreshes its own token (google-auth
    # Credentials.before_request).
    _credentials: dict[tuple[Any, ...], Any] = field(default_factory=dict, init=False,
                                                     compare=False, repr=False)

    @classmethod
    def google(cls) -> Endpoints:
        return cls(label="Google Cloud")

    @classmethod
    def sandbox(cls, status: Mapping[str, Any]) -> Endpoints:
        """From `rltui sandbox status --json` (the daemon's daemon.json)."""
        adc_file = Path(status["adc"])
        return cls(
            label="SANDBOX",
            grpc_target=str(status["grpc"]),
            compute_url=status.get("compute"),
            adc_file=adc_file,
            rest=dict(status.get("rest") or {}),
            tool_dirs=(Path(status["bin_dir"]),),
            # The real gcloud, kubectl and the sandbox's xpk reach the sandbox through this:
            # endpoint overrides, a token file, a private gcloud config and KUBECONFIG (written by
            # the daemon: rltui_sandbox.manage.tool_env), never the user's own.
            tool_env=dict(status["tool_env"]),
            time_scale=1.0 / float(status.get("speed") or 60.0),
            downloads_models=False,  # the sandbox's GRPO demo trains a tiny local policy
        )

    # --- Google clients (async, built inside a running loop) ---

    @staticmethod
    def _channel(target: str) -> grpc.aio.Channel:
        import grpc

        return grpc.aio.insecure_channel(target)

    def lustre(self) -> Any:
        from google.cloud import lustre_v1
        from google.cloud.lustre_v1.services.lustre.transports import LustreGrpcAsyncIOTransport

        if self.grpc_target is None:
            return lustre_v1.LustreAsyncClient(client_info=client_info())
        return lustre_v1.LustreAsyncClient(
            transport=LustreGrpcAsyncIOTransport(
                channel=self._channel(self.grpc_target), client_info=client_info()))

    def container(self) -> Any:
        from google.cloud import container_v1
        from google.cloud.container_v1.services.cluster_manager.transports import ClusterManagerGrpcAsyncIOTransport

        if self.grpc_target is None:
            return container_v1.ClusterManagerAsyncClient(client_info=client_info())
        return container_v1.ClusterManagerAsyncClient(
            transport=ClusterManagerGrpcAsyncIOTransport(
                channel=self._channel(self.grpc_target), client_info=client_info()))

    def monitoring(self) -> Any:
        from google.cloud import monitoring_v3
        from google.cloud.monitoring_v3.services.metric_service.transports import MetricServiceGrpcAsyncIOTransport

        if self.grpc_target is None:
            return monitoring_v3.MetricServiceAsyncClient(client_info=client_info())
        return monitoring_v3.MetricServiceAsyncClient(
            transport=MetricServiceGrpcAsyncIOTransport(
                channel=self._channel(self.grpc_target), client_info=client_info()))

    def service_usage(self) -> Any:
        from google.cloud import service_usage_v1
        from google.cloud.service_usage_v1.services.service_usage.transports import ServiceUsageGrpcAsyncIOTransport

        if self.grpc_target is None:
            return service_usage_v1.ServiceUsageAsyncClient(client_info=client_info())
        return service_usage_v1.ServiceUsageAsyncClient(
            transport=ServiceUsageGrpcAsyncIOTransport(
                channel=self._channel(self.grpc_target), client_info=client_info()))

    def billing(self) -> Any:
        """The Cloud Billing Catalog (public prices: no project, any credentials)."""
        from google.cloud import billing_v1
        from google.cloud.billing_v1.services.cloud_catalog.transports import CloudCatalogGrpcAsyncIOTransport

        if self.grpc_target is None:
            return billing_v1.CloudCatalogAsyncClient(client_info=client_info())
        return billing_v1.CloudCatalogAsyncClient(
            transport=CloudCatalogGrpcAsyncIOTransport(
                channel=self._channel(self.grpc_target), client_info=client_info()))

    def quotas(self) -> Any:
        """Cloud Quotas (cloudquotas.googleapis.com v1): the QuotaInfos Compute's regions.get does
        not list, such as the GPUs per GPU family (cloud/quotas.py). Built only when asked."""
        from google.cloud import cloudquotas_v1
        from google.cloud.cloudquotas_v1.services.cloud_quotas.transports import CloudQuotasGrpcAsyncIOTransport

        if self.grpc_target is None:
            return cloudquotas_v1.CloudQuotasAsyncClient(client_info=client_info())
        return cloudquotas_v1.CloudQuotasAsyncClient(
            transport=CloudQuotasGrpcAsyncIOTransport(
                channel=self._channel(self.grpc_target), client_info=client_info()))

    def compute(self, kind: str) -> Any:
        """A google-cloud-compute client (REST, sync: call it in a thread), e.g. "Networks"."""
        from .imports import compute_client

        cls = compute_client(kind)
        if self.compute_url is None:
            # The process's one ADC (`credentials`), not a google.auth.default() per client.
            return cls(credentials=self.credentials(), client_info=client_info())
        from google.auth.credentials import AnonymousCredentials

        return cls(credentials=AnonymousCredentials(), client_info=client_info(),
                   client_options={"api_endpoint": self.compute_url})

    # --- credentials (the Kubernetes API's bearer token) ---

    def credentials(self, scopes: tuple[str, ...] = (CLOUD_PLATFORM,)) -> Any:
        """Application Default Credentials (sync, may read files: call it in a thread): the
        sandbox's ADC file, else `google.auth.default()`. Refresh them with
        `google.auth.transport.requests.Request()`; both refresh at a token endpoint. Loaded
        once for each set of scopes, then shared."""
        key = (scopes, self._adc_stamp())
        with _CREDENTIALS_LOCK:
            creds = self._credentials.get(key)
            if creds is None:
                creds = self._load_credentials(scopes)
                self._credentials.clear()   # an older file's: never again
                self._credentials[key] = creds
        return creds

    def _adc_stamp(self) -> tuple[str, int] | None:
        """The ADC file this process reads and when it last changed, so that a new `gcloud auth
        application-default login` (which rewrites it) is loaded at the next call, not at the
        next start. The sandbox's file, else google.auth.default()'s first two places
        (google-auth 2.63 _default.py: GOOGLE_APPLICATION_CREDENTIALS, then gcloud's
        application_default_credentials.json under CLOUDSDK_CONFIG or ~/.config/gcloud:
        _cloud_sdk.get_config_path); None where no file is read (the metadata server)."""
        if self.adc_file is not None:
            path = str(self.adc_file)
        else:
            config = os.environ.get("CLOUDSDK_CONFIG") or os.path.join(
                os.path.expanduser("~"), ".config", "gcloud")
            path = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS") or os.path.join(
                config, "application_default_credentials.json")
        try:
            return path, os.stat(path).st_mtime_ns
        except OSError:
            return None

    def _load_credentials(self, scopes: tuple[str, ...]) -> Any:
        import google.auth

        if self.adc_file is not None:
            # The sandbox writes a service-account key file (see rltui_sandbox.kube.auth): loaded
            # by its type-specific loader, which google-auth 2.63 recommends over the deprecated
            # google.auth.load_credentials_from_file (which gives the same credentials).
            from google.oauth2 import service_account

            return service_account.Credentials.from_service_account_file(str(self.adc_file),
                                                                         scopes=list(scopes))
        creds, _ = google.auth.default(scopes=list(scopes))
        return creds

    def api_url(self, name: str) -> str:
        """The REST base URL of a Google API, ending in "/"."""
        return self.rest.get(name) or f"https://{name}.googleapis.com/"

    def require_credentials(self) -> None:
        """Application Default Credentials must exist: one line with the fix if absent."""
        from google.auth.exceptions import DefaultCredentialsError

        from .errors import CloudError

        try:
            self.credentials()
        except (DefaultCredentialsError, OSError, ValueError):
            raise CloudError("no Application Default Credentials: run `gcloud auth"
                             " application-default login`, then try again",
                             transient=False, code="NoCredentials") from None

    # --- subprocesses (xpk, gcloud, kubectl) ---

    def xpk_gcloud_dir(self, env: Mapping[str, str] | None = None) -> Path:
        """The folder xpk requires before it creates anything: real xpk 1.16.0 checks
        `~/.config/gcloud`; the sandbox's xpk checks the private CLOUDSDK_CONFIG it is given."""
        env = self.subprocess_env() if env is None else env
        if "CLOUDSDK_CONFIG" in self.tool_env:
            return Path(self.tool_env["CLOUDSDK_CONFIG"])
        return Path(env.get("HOME") or os.path.expanduser("~")) / ".config" / "gcloud"

    def subprocess_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        if self.tool_dirs:
            env["PATH"] = os.pathsep.join([*(str(d) for d in self.tool_dirs), env.get("PATH", "")])
        env.update(self.tool_env)
        return env
