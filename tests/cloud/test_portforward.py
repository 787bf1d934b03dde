"""DashboardForward: a local port to `<cluster>-head-svc:8265` through the pod port-forward API."""

from __future__ import annotations

import asyncio
import os
from typing import AsyncIterator

import aiohttp
import pytest

from rltui.cloud.errors import CloudError
from rltui.cloud.kube import KubeAdapter
from rltui.cloud.portforward import DashboardForward


@pytest.fixture
async def forward(kube: KubeAdapter) -> AsyncIterator[DashboardForward]:
    fwd = DashboardForward(kube, "ray-a4-head-svc")
    yield fwd
    await fwd.close()


async def version(url: str) -> dict:
    # A new TCP connection per request, as Ray's job client (requests, no session) makes them.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as s:
        async with s.get(f"{url}/api/version", timeout=aiohttp.ClientTimeout(total=5)) as r:
            assert r.status == 200
            return await r.json()


async def test_forward_reaches_the_head_and_follows_its_replacement(api, head, dashboard, forward) -> None:
    old, new = await dashboard("old-head"), await dashboard("new-head")
    await head("ray-a4-head-aaaaa", old)
    url = await forward.start()
    host, port = url.removeprefix("http://").split(":")
    assert host == "127.0.0.1" and int(port) != 8265
    await forward.wait_ready(timeout_s=5)
    assert (await version(url))["served_by"] == "old-head"
    # KubeRay replaces a lost head pod: the next connection goes to the new one.
    await api.store.delete("pods", "ray-a4-head-aaaaa", "default")
    await head("ray-a4-head-bbbbb", new)
    assert (await version(url))["served_by"] == "new-head"
    assert forward.pod == "ray-a4-head-bbbbb"
    # Every connection resolved the service; the pods come from a watch (listed once), and
    # again only if the watch had not yet told of the old head's end (its pod answered 404).
    calls = api.record.snapshot()["calls"]
    assert calls["kube:GET:services"] >= 3 and calls["kube:LIST:pods"] <= 2


async def test_large_bodies_cross_both_ways_intact(head, dashboard, forward) -> None:
    await head("ray-a4-head-aaaaa", await dashboard("head"))
    url = await forward.start()
    body = os.urandom(3 * 1024 * 1024)  # like a working-dir upload
    async with aiohttp.ClientSession() as s:
        for _ in range(2):  # the second request reuses the kept-alive connection
            async with s.post(f"{url}/echo", data=body) as r:
                assert await r.read() == body


async def test_a_dropped_link_ends_one_connection_and_the_next_reconnects(head, dashboard, relay, forward) -> None:
    link = await relay(await dashboard("head"))
    await head("ray-a4-head-aaaaa", link.port)
    url = await forward.start()
    port = int(url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /api/version HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
    assert link.cut() == 1
    async with asyncio.timeout(5):
        while await reader.read(65536):
            pass  # the rest of the answer, then EOF: the dropped link closed this connection
    writer.close()
    assert (await version(url))["served_by"] == "head"
    assert link.accepted == 2


async def test_wait_ready_says_what_is_missing(api, kube, make_pod, forward) -> None:
    await forward.start()
    with pytest.raises(CloudError, match="service ray-a4-head-svc not found") as info:
        await forward.wait_ready(timeout_s=0.3)
    assert info.value.transient
    await kube.apply({"apiVersion": "v1", "kind": "Service",
                      "metadata": {"name": "ray-a4-head-svc", "namespace": "default"},
                      "spec": {"selector": {"ray.io/cluster": "ray-a4", "ray.io/node-type": "head"},
                               "ports": [{"name": "dashboard", "port": 8265, "targetPort": 8265}]}})
    await kube.apply(make_pod("ray-a4-head-aaaaa", {"ray.io/cluster": "ray-a4", "ray.io/node-type": "head"}))
    with pytest.raises(CloudError, match="no Running and Ready pod behind service ray-a4-head-svc"):
        await forward.wait_ready(timeout_s=0.3)
    # Running but nothing listens on :8265 in the pod: the kubelet's error comes through.
    await api.store.patch_status("pods", "ray-a4-head-aaaaa", {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}, "default")
    with pytest.raises(CloudError, match="connection refused"):
        await forward.wait_ready(timeout_s=0.3)


async def test_close_stops_listening(head, dashboard, forward) -> None:
    await head("ray-a4-head-aaaaa", await dashboard("head"))
    url = await forward.start()
    await version(url)
    await forward.close()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]))
