"""The fake gcloud's surface: argv forms, --format, errors and exit codes, properties,
get-credentials merging, and what happens when no sandbox answers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from google.cloud import container_v1

from rltui.sandbox.tools.install import install_tools


def test_lists_in_every_format(box) -> None:
    p = f"--project={box.project}"
    names = box.tool("gcloud", "compute", "networks", "list", p, "--format=value(name)")
    assert names.returncode == 0 and names.stdout == "default\n"
    as_json = json.loads(box.tool("gcloud", "compute", "networks", "list", p, "--format", "json").stdout)
    assert [n["name"] for n in as_json] == ["default"] and as_json[0]["x_gcloud_subnet_mode"] == "AUTO"
    described = yaml.safe_load(box.tool("gcloud", "compute", "networks", "describe", "default", p).stdout)
    assert described["selfLink"].endswith(f"/projects/{box.project}/global/networks/default")
    assert described["peerings"][0]["name"] == "servicenetworking-googleapis-com"
    table = box.tool("gcloud", "compute", "addresses", "list", p).stdout.splitlines()
    assert table[0].split()[:2] == ["NAME", "ADDRESS/RANGE"]
    assert table[1].split()[:2] == ["google-managed-services-default", "10.80.0.0"]
    picked = box.tool("gcloud", "compute", "addresses", "list", p,
                      "--format=table[no-heading](name,network.basename(),prefixLength)").stdout
    assert picked.split() == ["google-managed-services-default", "default", "16"]
    csv = box.tool("gcloud", "compute", "addresses", "list", p, "--format=csv(name,purpose)").stdout
    assert csv == "name,purpose\ngoogle-managed-services-default,VPC_PEERING\n"
    empty = box.tool("gcloud", "lustre", "instances", "list", p, "--location=us-east1-b")
    assert empty.returncode == 0 and empty.stdout == "" and "Listed 0 items." in empty.stderr


def test_default_project_and_properties(box) -> None:
    unset = box.tool("gcloud", "lustre", "instances", "list")
    assert unset.returncode == 1
    assert unset.stderr.startswith("ERROR: (gcloud.lustre.instances.list) The required property [project] is not")
    got = box.tool("gcloud", "config", "get", "project")
    assert got.returncode == 0 and got.stdout == "" and got.stderr.strip() == "(unset)"

    env = box.env(RLTUI_SANDBOX_PROJECT="from-env")
    assert box.tool("gcloud", "config", "get", "project", env=env).stdout == "from-env\n"
    assert box.tool("gcloud", "config", "get-value", "project", env=env).stdout == "from-env\n"
    assert box.tool("gcloud", "lustre", "instances", "list", env=env).returncode == 0

    assert box.tool("gcloud", "config", "set", "project", "chosen").stderr == "Updated property [core/project].\n"
    assert box.tool("gcloud", "config", "get-value", "project", env=env).stdout == "chosen\n"
    assert "project = chosen" in box.tool("gcloud", "config", "list").stdout
    env["CLOUDSDK_CORE_PROJECT"] = "override"
    assert box.tool("gcloud", "config", "get", "project", env=env).stdout == "override\n"


def test_auth_list_and_version(box) -> None:
    accounts = box.tool("gcloud", "auth", "list")
    assert accounts.returncode == 0 and "ACTIVE  ACCOUNT\n*       " in accounts.stdout
    assert box.tool("gcloud", "auth", "list", "--format=value(account)").stdout.strip().endswith("@example.com")
    for argv in (["gcloud", "--version"], ["gcloud", "version"]):
        result = box.tool(*argv)
        assert result.returncode == 0 and result.stdout.startswith("Google Cloud SDK ")


@pytest.mark.parametrize("argv, code, message", [
    (["gcloud", "frobnicate"], 2, "ERROR: (gcloud) Invalid choice: 'frobnicate'."),
    (["gcloud", "lustre", "instances", "resize", "x"], 2, "ERROR: (gcloud.lustre.instances) Invalid choice: 'resize'."),
    (["gcloud", "lustre"], 2, "ERROR: (gcloud.lustre) Command name argument expected."),
    (["gcloud", "lustre", "instances", "describe", "x", "--location=z", "--bogus"], 2,
     "ERROR: (gcloud.lustre.instances.describe) unrecognized arguments: --bogus"),
    (["gcloud", "lustre", "instances", "describe", "--location=z"], 2,
     "ERROR: (gcloud.lustre.instances.describe) argument INSTANCE: Must be specified."),
    (["gcloud", "lustre", "instances", "create", "x", "--location=z", "--filesystem=lustre", "--network=n",
      "--per-unit-storage-throughput=1000"], 2,
     "ERROR: (gcloud.lustre.instances.create) Missing required argument [--capacity-gib]: Must be specified."),
    (["gcloud", "lustre", "instances", "create", "x", "--location=z", "--filesystem=lustre", "--network=n",
      "--per-unit-storage-throughput=1000", "--capacity-gib=lots"], 2,
     "ERROR: (gcloud.lustre.instances.create) argument --capacity-gib: Invalid value 'lots'"),
    (["gcloud", "container", "clusters", "update", "c", "--region=r", "--update-addons=RayOperator"], 2,
     "ERROR: (gcloud.container.clusters.update) argument --update-addons: Bad syntax"),
    (["gcloud", "container", "clusters", "describe", "c"], 1,
     "ERROR: (gcloud.container.clusters.describe) One of [--location, --region, --zone] must be supplied."),
    (["gcloud", "compute", "networks", "list", "--format=fancy(name)"], 1,
     "ERROR: (gcloud.compute.networks.list) Format [fancy] not found."),
])
def test_usage_errors(box, argv: list[str], code: int, message: str) -> None:
    result = box.tool(*argv, env=box.env(RLTUI_SANDBOX_PROJECT=box.project))
    assert result.returncode == code, result.stderr
    assert result.stderr.startswith(message) and result.stdout == ""


def test_cloud_refusals_name_the_code(box) -> None:
    p = f"--project={box.project}"
    cases = [
        (["gcloud", "container", "clusters", "describe", "nope", "--region=us-east1", p], "NOT_FOUND"),
        (["gcloud", "container", "clusters", "get-credentials", "nope", "--region=us-east1", p], "NOT_FOUND"),
        # gcloud compute words every API refusal as two lines (FACTS.md)
        (["gcloud", "compute", "networks", "describe", "nope", p],
         f"Could not fetch resource:\n - The resource 'projects/{box.project}/global/networks/nope' was not found\n"),
        (["gcloud", "lustre", "instances", "create", "bad_ID", p, "--location=us-east1-b", "--capacity-gib=9000",
          "--per-unit-storage-throughput=1000", "--filesystem=lustre",
          f"--network=projects/{box.project}/global/networks/default"], "INVALID_ARGUMENT"),
        (["gcloud", "compute", "addresses", "create", "r", "--global", "--network=nope", p],
         "Could not fetch resource:\n - The resource"),
    ]
    for argv, code in cases:
        result = box.tool(*argv)
        command = ".".join(a for a in argv[1:4] if not a.startswith("-"))
        assert result.returncode == 1, result.stderr
        # get-credentials says "Fetching cluster endpoint and auth data." first, as gcloud does
        expected = code if code.startswith("Could not") else f"{code}: "
        assert f"\nERROR: (gcloud.{command}) {expected}" in "\n" + result.stderr, result.stderr


def test_lustre_create_waits_for_active_without_async(box) -> None:
    p = f"--project={box.project}"
    created = box.tool("gcloud", "lustre", "instances", "create", "sync-one", p, "--location", "us-east1-b",
                       "--capacity-gib", "9000", "--per-unit-storage-throughput", "1000", "--filesystem", "lustre",
                       "--network", f"projects/{box.project}/global/networks/default", "--format=value(state)")
    assert created.returncode == 0, created.stderr
    assert created.stdout == "ACTIVE\n"
    assert "to complete...done.\nCreated instance [sync-one].\n" in created.stderr
    deleted = box.tool("gcloud", "lustre", "instances", "delete", "sync-one", p, "--location=us-east1-b",
                       "--quiet", "--async")  # the codelab's teardown form: returns at once
    assert deleted.returncode == 0 and "Check operation [" in deleted.stderr
    gone = box.tool("gcloud", "lustre", "instances", "delete", "sync-one", p, "--location=us-east1-b", "--quiet")
    assert gone.returncode == 1 and ("FAILED_PRECONDITION" in gone.stderr or "NOT_FOUND" in gone.stderr)


def test_get_credentials_merges_into_an_existing_kubeconfig(box) -> None:
    box.call(box.world.create_cluster, box.project, "us-east1", container_v1.Cluster(name="k1"), seconds=0)
    box.kubeconfig.parent.mkdir(parents=True)
    box.kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "mine",
        "clusters": [{"name": "mine", "cluster": {"server": "https://10.0.0.1"}}],
        "users": [{"name": "mine", "user": {"token": "t"}}],
        "contexts": [{"name": "mine", "context": {"cluster": "mine", "user": "mine"}}]}))
    for _ in range(2):  # twice: the entry is replaced, not duplicated
        result = box.tool("gcloud", "container", "clusters", "get-credentials", "k1", "--location=us-east1",
                          f"--project={box.project}")
        assert result.returncode == 0, result.stderr
    contexts = box.tool("kubectl", "config", "get-contexts", "-o", "name").stdout.split()
    assert sorted(contexts) == sorted(["mine", f"gke_{box.project}_us-east1_k1"])
    assert box.tool("kubectl", "config", "current-context").stdout.strip() == f"gke_{box.project}_us-east1_k1"
    assert box.kubeconfig.stat().st_mode & 0o077 == 0
    assert box.tool("kubectl", "get", "namespace", "default", "-o", "name").stdout == "namespace/default\n"
    assert not (box.home / ".kube" / "config").exists()  # $KUBECONFIG was honoured


def test_no_sandbox_answering(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    install_tools(tmp_path / "bin", dead)
    result = subprocess.run([str(tmp_path / "bin" / "gcloud"), "compute", "networks", "list", "--project=p"],
                            capture_output=True, text=True, timeout=30, env={"HOME": str(tmp_path)})
    assert result.returncode == 1
    assert "UNAVAILABLE: the rltui sandbox at" in result.stderr and "rltui sandbox start" in result.stderr


def test_control_api_refuses_unknown_operations(box) -> None:
    request = urllib.request.Request(f"{box.url}/_sandbox/op/teleport", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 404
    assert json.loads(caught.value.read())["error"]["code"] == "INVALID_ARGUMENT"


def test_tools_start_without_the_cloud_clients() -> None:
    probe = ("import sys, rltui.sandbox.tools.gcloud, rltui.sandbox.tools.xpk; "
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'google', 'grpc', 'kubernetes', 'aiohttp', "
             "'yaml', 'textual'}))")
    result = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr
