"""A minimal /openapi/v3: just enough for `kubectl apply` to validate on the server side.

kubectl 1.32 (`--validate=strict`, the default) looks up the PATCH operation of each kind in
the OpenAPI v3 document of its group version; when that operation lists the `fieldValidation`
query parameter it sends `fieldValidation=Strict` instead of validating against schemas it
would otherwise download (and fail on). No schemas are served: kubectl then computes apply
patches from its compiled-in types (built-ins) or as JSON merge patches (RayCluster).
"""

from __future__ import annotations

import hashlib
import json

from aiohttp import web

from rltui_sandbox.kube.resources import ResourceType, groups

_PATCH_PARAMS = ["dryRun", "fieldManager", "fieldValidation", "force"]


def _item_path(r: ResourceType) -> str:
    prefix = f"/apis/{r.group}/{r.version}" if r.group else f"/api/{r.version}"
    scope = "/namespaces/{namespace}" if r.namespaced else ""
    return f"{prefix}{scope}/{r.plural}/{{name}}"


def group_version_doc(group_version: str) -> dict:
    paths = {}
    for r in groups().get(group_version, []):
        gvk = {"group": r.group, "version": r.version, "kind": r.kind}
        media = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
        if not r.custom:
            media.insert(2, "application/strategic-merge-patch+json")
        patch = {
            "operationId": f"patch{r.kind}",
            "parameters": [{"name": p, "in": "query", "schema": {"type": "string"}} for p in _PATCH_PARAMS],
            "requestBody": {"content": {m: {"schema": {"type": "object"}} for m in media}, "required": True},
            "responses": {"200": {"description": "OK"}},
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
        }
        paths[_item_path(r)] = {"patch": patch}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.4"},
            "paths": paths, "components": {"schemas": {}}}


def _url_key(group_version: str) -> str:
    return f"apis/{group_version}" if "/" in group_version else f"api/{group_version}"


_DOCS = {_url_key(gv): json.dumps(group_version_doc(gv)) for gv in groups()}
_HASHES = {key: hashlib.sha256(doc.encode()).hexdigest()[:32].upper() for key, doc in _DOCS.items()}


async def _root(_: web.Request) -> web.Response:
    paths = {key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={_HASHES[key]}"} for key in _DOCS}
    return web.json_response({"paths": paths})


async def _doc(request: web.Request) -> web.Response:
    doc = _DOCS.get(request.match_info["tail"].strip("/"))
    if doc is None:
        return web.Response(status=404, text="404 page not found\n")
    return web.Response(text=doc, content_type="application/json")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/openapi/v3", _root)
    app.router.add_get("/openapi/v3/{tail:.*}", _doc)
