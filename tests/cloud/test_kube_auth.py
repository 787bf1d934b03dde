"""The Kubernetes client is built as for GKE (https, the cluster's CA, an ADC bearer token that
refreshes), and the API refuses requests without a valid token: real HTTPS, no mocks."""

from __future__ import annotations

import base64
import dataclasses
import ssl

import aiohttp
import pytest

from rltui.cloud.kube import KubeAdapter
from rltui_sandbox.kube.auth import SANDBOX_TOKEN, TokenIssuer


async def test_the_adapter_is_built_from_the_cluster_endpoint_ca_and_an_adc_token(api, kube) -> None:
    cfg = kube.configuration
    assert cfg.host == f"https://{api.cluster.endpoint}" == api.url
    assert cfg.ca_cert_data == base64.b64decode(api.cluster.master_auth.cluster_ca_certificate).decode()
    auth = (await cfg.auth_settings())["BearerToken"]
    assert auth["in"] == "header" and auth["key"] == "authorization"
    scheme, token = auth["value"].split(" ", 1)
    assert scheme == "Bearer" and token.startswith("sbx1.") and api.issuer.valid(token)
    assert kube.api.rest_client.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert await kube.list("pods") == []


@pytest.mark.parametrize("header", [None, "Bearer ya29.made-up", "Basic YWRtaW46YWRtaW4=", "expired"])
async def test_requests_without_a_valid_token_are_refused_401(api, header) -> None:
    if header == "expired":
        past = TokenIssuer(api.issuer.secret, clock=lambda: 1_000_000.0)
        header = f"Bearer {past.issue()[0]}"
    headers = {"Authorization": header} if header else {}
    ctx = api.tls.client_context()
    async with aiohttp.ClientSession() as s:
        for path in ("/api/v1/namespaces/default/pods", "/version", "/apis", "/_sandbox/op/info"):
            async with s.get(api.url + path, headers=headers, ssl=ctx) as resp:
                body = await resp.json()
                assert resp.status == 401, path
                assert body["kind"] == "Status" and body["reason"] == "Unauthorized", body


async def test_the_fixed_sandbox_token_is_accepted_and_the_ca_is_required(api) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{api.url}/api/v1/namespaces/default/pods", ssl=api.tls.client_context(),
                         headers={"Authorization": f"Bearer {SANDBOX_TOKEN}"}) as resp:
            assert resp.status == 200 and (await resp.json())["kind"] == "PodList"
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await s.get(f"{api.url}/version", ssl=ssl.create_default_context())


async def test_a_token_is_refreshed_before_it_expires(api) -> None:
    issued: list[int] = []
    real = api.issuer.issue

    def counting(lifetime_s=None):
        token, lifetime = real(lifetime_s)
        issued.append(lifetime)
        return token, lifetime

    api.issuer.issue = counting  # type: ignore[method-assign]
    kube = await api.adapter()
    try:
        for _ in range(3):
            await kube.list("pods")
        assert len(issued) == 1, "an hour-long token is reused"
        # Tokens within google-auth's refresh margin (3m45s) of their expiry count as expired:
        # a 2-minute token is refreshed before every request and never reaches the API stale.
        await kube.close()
        kube = await api.adapter()
        await kube.list("pods")
        assert len(issued) == 1, "a second connection shares the Endpoints' credentials"
        api.issuer.lifetime_s = 120
        await kube.close()
        # New Endpoints (another process's): credentials of their own, 2-minute tokens.
        kube = KubeAdapter(dataclasses.replace(api.endpoints), cluster=api.cluster, backoff_s=0.02)
        await kube.connect()
        before = len(issued)
        for _ in range(3):
            await kube.list("pods")
        assert len(issued) - before >= 3
    finally:
        await kube.close()


async def test_the_daemon_layout_one_app_on_an_http_and_an_https_site(tmp_path, test_tls) -> None:
    """As the daemon serves it: Google-API surfaces and the token endpoint over http, the
    Kubernetes API over https only (http keeps /version, the readiness probe)."""
    from aiohttp import web

    from rltui_sandbox.kube import KubeStore, make_app
    from rltui_sandbox.kube.auth import add_token_route

    issuer = TokenIssuer.load(test_tls.folder)
    app = make_app(KubeStore(tmp_path / "kube"), issuer=issuer)
    add_token_route(app, issuer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=test_tls.server_context()).start()
    http = f"http://127.0.0.1:{runner.addresses[0][1]}"
    https = f"https://127.0.0.1:{runner.addresses[1][1]}"
    ctx = test_tls.client_context()
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{http}/version") as resp:
                assert resp.status == 200
            async with s.get(f"{http}/api/v1/namespaces/default/pods") as resp:
                assert resp.status == 404 and "https" in await resp.text()
            async with s.post(f"{http}/token", data={"grant_type": "refresh_token",
                                                     "refresh_token": "1//wrong"}) as resp:
                assert resp.status == 400 and (await resp.json())["error"] == "invalid_grant"
            async with s.post(f"{http}/token", data={"grant_type": "refresh_token",
                                                     "refresh_token": issuer.refresh_token}) as resp:
                answer = await resp.json()
            assert answer["token_type"] == "Bearer" and answer["expires_in"] == 3600
            bearer = {"Authorization": f"Bearer {answer['access_token']}"}
            async with s.get(f"{https}/api/v1/namespaces/default/pods", headers=bearer, ssl=ctx) as resp:
                assert resp.status == 200
            async with s.post(f"{https}/token", headers=bearer, ssl=ctx) as resp:
                assert resp.status == 404, "Google surfaces are not on the cluster endpoint"
    finally:
        await runner.cleanup()


def test_credentials_are_loaded_once_until_the_adc_file_changes(api) -> None:
    """One ADC object a process (parsing a key again cost 0.1 s a call), until the file is
    written again, as `gcloud auth application-default login` does: then the new one."""
    import os

    endpoints = dataclasses.replace(api.endpoints)
    first = endpoints.credentials()
    assert endpoints.credentials() is first
    assert endpoints.adc_file is not None
    stat = os.stat(endpoints.adc_file)
    os.utime(endpoints.adc_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    second = endpoints.credentials()
    assert second is not first and endpoints.credentials() is second
