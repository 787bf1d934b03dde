"""The REST APIs the real gcloud talks to, by gcloud's API name (the `<API>` of
CLOUDSDK_API_ENDPOINT_OVERRIDES_<API>): each an aiohttp Application factory the daemon serves on
a loopback port of its own (rest_util's docstring says why). Compute is not here: it shares the
Kubernetes API's app under /compute/v1/ (rest_compute.py)."""

from __future__ import annotations

from typing import Any, Callable

from aiohttp import web

from rltui_sandbox.rest_container import container_app
from rltui_sandbox.rest_iam import iam_app
from rltui_sandbox.rest_lustre import lustre_app
from rltui_sandbox.rest_resourcemanager import resourcemanager_app
from rltui_sandbox.rest_servicenetworking import servicenetworking_app
from rltui_sandbox.rest_serviceusage import serviceusage_app
from rltui_sandbox.rest_storage import storage_app

__all__ = ["rest_apps"]


def rest_apps() -> dict[str, Callable[..., web.Application]]:
    apps: dict[str, Callable[..., Any]] = {
        "lustre": lustre_app, "container": container_app, "serviceusage": serviceusage_app,
        "servicenetworking": servicenetworking_app, "cloudresourcemanager": resourcemanager_app,
        "iam": iam_app,  # IAM v1 service accounts and their policies (rest_iam.py)
        "storage": storage_app,  # Cloud Storage JSON API, host root (rest_storage.py)
    }
    return apps
