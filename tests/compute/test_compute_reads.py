"""`rltui status` asks Compute from a forked child (rltui/cloud/computereads.py): the child's
answer reads as the client's own messages do, its CloudError is the parent's, a child that
answers nothing leaves the reads to the parent, and the parent never loads google-cloud-compute.
Against the sandbox's Compute REST routes (tests/compute/conftest.py), through compute_v1."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from google.cloud import compute_v1

from rltui.cloud.endpoints import Endpoints
from rltui.cloud.errors import CloudError
from rltui.cloud import computereads
from rltui.plan.context import Context
from tests.compute.test_routers import NET, P, R, make_network, make_router, nat_ip
from tests.plan.fakes import b200_config

ROOT = Path(__file__).resolve().parents[2]


def seeded(cloud) -> Context:
    c = cloud.compute()
    make_network(c)
    ips = [f"{NET}-nat-ips-{R}-{i}" for i in (0, 1)]
    for ip in ips:
        c["addresses"].insert(project=P, region=R, address_resource=nat_ip(ip, {"ghpc_role": "network"})
                              ).result(timeout=10)
    make_router(c, ips)
    c["firewalls"].insert(project=P, firewall_resource=compute_v1.Firewall(
        name=f"{NET}-allow-lustre-traffic", network=f"projects/{P}/global/networks/{NET}",
        description="rltui: made for the Lustre instance", source_ranges=["10.90.0.0/24"],
        allowed=[compute_v1.Allowed(I_p_protocol="tcp", ports=["988"])])).result(timeout=10)
    return Context(b200_config(P), Endpoints(label="SANDBOX", compute_url=cloud.endpoint))


def read_here(ctx: Context):
    """The reads in this process: what a child that gave no answer leaves to the parent."""
    return lambda: computereads.read(ctx.network, ctx.cfg.region, ctx.cfg.address_name)


def view(reads: computereads.ComputeReads) -> dict[str, object]:
    """What the inventory reads of the answers (plan/inventory.py, leftovers.py)."""
    router = reads.routers[0]
    return {
        "networks": [n.name for n in reads.networks],
        "router": (router.name, router.network, [(n.name, list(n.nat_ips)) for n in router.nats],
                   bool(router.creation_timestamp)),
        "nat_ips": [(a.name, a.status, a.address, dict(a.labels)) for a in reads.nat_ips],
        "rules": [(f.name, f.description, list(f.source_ranges)) for f in reads.firewalls],
        "address": reads.address,
    }


def test_the_childs_answer_reads_as_the_clients_messages(cloud) -> None:
    ctx = seeded(cloud)
    here = asyncio.run(read_here(ctx)())
    with computereads.forked() as child:
        assert child.pid is not None
        child.ask(ctx.cfg, ctx.endpoints)
        there = asyncio.run(child.result(read_here(ctx)))
    assert view(there) == view(here)
    assert view(there)["router"][2] == [(f"cloud-nat-{R}", [
        f"https://www.googleapis.com/compute/v1/projects/{P}/regions/{R}/addresses/{NET}-nat-ips-{R}-{i}"
        for i in (0, 1)])]
    assert there.network(NET) is not None and there.network("nope") is None
    assert child.pid is None  # reaped


def test_the_childs_cloud_error_is_raised_in_the_parent(cloud, monkeypatch) -> None:
    ctx = seeded(cloud)

    async def refused(*_args: object) -> computereads.ComputeReads:
        raise CloudError("list networks: PERMISSION_DENIED", transient=False, code="PERMISSION_DENIED")

    monkeypatch.setattr(computereads, "read", refused)   # the child is forked after this
    with computereads.forked() as child:
        child.ask(ctx.cfg, ctx.endpoints)
        with pytest.raises(CloudError) as err:
            asyncio.run(child.result(read_here(ctx)))
    assert (err.value.message, err.value.transient, err.value.code) == \
        ("list networks: PERMISSION_DENIED", False, "PERMISSION_DENIED")


def test_a_child_without_an_answer_leaves_the_reads_to_the_parent(cloud, monkeypatch, caplog) -> None:
    ctx = seeded(cloud)

    def broken(_reads: computereads.ComputeReads) -> computereads.ComputeReads:
        raise RuntimeError("cannot copy")

    monkeypatch.setattr(computereads, "plain_reads", broken)
    with caplog.at_level(logging.WARNING), computereads.forked() as child:
        child.ask(ctx.cfg, ctx.endpoints)
        reads = asyncio.run(child.result(read_here(ctx)))
    assert NET in view(reads)["networks"]
    assert "RuntimeError: cannot copy; reading here" in caplog.text


def test_the_parent_never_loads_google_cloud_compute(cloud) -> None:
    seeded(cloud)
    script = f"""
import asyncio, json, sys
from rltui.cloud import computereads
child = computereads.Forked()   # first thing, as `rltui status` does
from rltui.cloud.endpoints import Endpoints
from rltui.plan.context import Context
from tests.plan.fakes import b200_config
ctx = Context(b200_config({P!r}), Endpoints(label="SANDBOX", compute_url={cloud.endpoint!r}))
child.ask(ctx.cfg, ctx.endpoints)
reads = asyncio.run(child.result(lambda: computereads.read(ctx.network, "us-east1", "x")))
child.close()
print(json.dumps([[n.name for n in reads.networks],
                  sorted(m for m in sys.modules if m.startswith("google.cloud.compute_v1"))]))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True)
    networks, loaded = json.loads(done.stdout)
    assert NET in networks
    assert loaded == []


def test_compute_services_load_one_at_a_time_and_the_package_whole_on_demand() -> None:
    script = """
import json, sys
from rltui.cloud.imports import compute_client
compute_client("Networks")
before = sorted(m.rsplit(".", 1)[-1] for m in sys.modules
                if m.startswith("google.cloud.compute_v1.services.") and m.count(".") == 4)
from google.cloud import compute_v1
print(json.dumps([before, compute_v1.FirewallsClient.__name__, len(compute_v1.__all__)]))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True)
    before, firewalls, exported = json.loads(done.stdout)
    # the Networks client brings the operations client its long-running calls poll with
    assert before == ["global_operations", "networks"]
    assert firewalls == "FirewallsClient" and exported > 1000


def test_a_child_never_asked_is_ended_with_its_parents_command() -> None:
    """Bad input (exit 2) or an error before the cloud was asked: the child goes, no zombie."""
    import os

    with computereads.forked() as child:
        pid = child.pid
        assert pid is not None
    assert child.pid is None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
