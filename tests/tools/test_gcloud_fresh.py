"""The fake gcloud against a fresh project and missing resources: what the real one prints."""

from __future__ import annotations


def test_missing_compute_resources_print_two_lines(box) -> None:
    p = f"--project={box.project}"
    for argv, path, where in (
        (["compute", "addresses", "describe", "nope", "--global"], "global/addresses/nope", "addresses.describe"),
        (["compute", "networks", "describe", "nope"], "global/networks/nope", "networks.describe"),
    ):
        out = box.tool("gcloud", *argv, p)
        assert out.returncode == 1 and out.stdout == ""
        assert out.stderr == (f"ERROR: (gcloud.compute.{where}) Could not fetch resource:\n"
                              f" - The resource 'projects/{box.project}/{path}' was not found\n")
        assert "not found" not in out.stderr.splitlines()[0]


def test_no_peering_is_an_empty_list(box) -> None:
    p = f"--project={box.project}"
    box.call(box.world.create_network, box.project, "bare-net")
    out = box.tool("gcloud", "services", "vpc-peerings", "list", "--network=bare-net", p, "--format=json")
    assert out.returncode == 0 and out.stdout == "[]\n"


def test_a_fresh_project_refuses_until_enabled(make_box) -> None:
    box = make_box(enabled_services=())
    p = f"--project={box.project}"
    nets = box.tool("gcloud", "compute", "networks", "list", p)
    assert nets.returncode == 1
    first, second = nets.stderr.splitlines()[:2]
    assert first == "ERROR: (gcloud.compute.networks.list) Could not fetch resource:"
    assert second.startswith(" - Compute Engine API has not been used in project ")
    peer = box.tool("gcloud", "services", "vpc-peerings", "list", "--network=default", p, "--format=json")
    assert peer.returncode == 1 and "PERMISSION_DENIED: Service Networking API has not been used" in peer.stderr
    assert box.tool("gcloud", "services", "enable", "compute.googleapis.com", p).returncode == 0
    listed = box.tool("gcloud", "compute", "networks", "list", p, "--format=value(name)")
    assert listed.returncode == 0 and listed.stdout == "default\n"  # enabling compute made it
