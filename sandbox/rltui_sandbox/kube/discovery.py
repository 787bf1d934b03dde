"""/version, /api, /apis and health endpoints: what kubectl reads before any request.

Aggregated discovery (apidiscovery.k8s.io/v2) is not served: these answer plain
`application/json`, from which client-go falls back to per-group-version discovery.
"""

from __future__ import annotations

from aiohttp import web

from rltui_sandbox.kube.resources import api_group_list, groups, resource_list

VERSION = {
    "major": "1", "minor": "32", "gitVersion": "v1.32.4-gke.1000", "gitCommit": "0000000000000000",
    "gitTreeState": "clean", "buildDate": "2025-04-01T00:00:00Z", "goVersion": "go1.23.6",
    "compiler": "gc", "platform": "linux/amd64",
}


async def _version(_: web.Request) -> web.Response:
    return web.json_response(VERSION)


async def _api(request: web.Request) -> web.Response:
    host = request.host
    return web.json_response({"kind": "APIVersions", "versions": ["v1"],
                              "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]})


async def _core(_: web.Request) -> web.Response:
    return web.json_response(resource_list("v1"))


async def _apis(_: web.Request) -> web.Response:
    return web.json_response(api_group_list())


async def _group(request: web.Request) -> web.Response:
    name = request.match_info["group"]
    for group in api_group_list()["groups"]:
        if group["name"] == name:
            return web.json_response({"kind": "APIGroup", "apiVersion": "v1", **group})
    return web.Response(status=404, text="404 page not found\n")


async def _group_version(request: web.Request) -> web.Response:
    gv = f"{request.match_info['group']}/{request.match_info['version']}"
    if gv not in groups():
        return web.Response(status=404, text="404 page not found\n")
    return web.json_response(resource_list(gv))


async def _ok(_: web.Request) -> web.Response:
    return web.Response(text="ok")


def add_routes(app: web.Application) -> None:
    router = app.router
    router.add_get("/version", _version)
    router.add_get("/version/", _version)  # the Python client asks with a slash
    router.add_get("/api", _api)
    router.add_get("/api/v1", _core)
    router.add_get("/apis", _apis)
    router.add_get("/apis/{group}", _group)
    router.add_get("/apis/{group}/{version}", _group_version)
    for path in ("/healthz", "/readyz", "/livez"):
        router.add_get(path, _ok)
