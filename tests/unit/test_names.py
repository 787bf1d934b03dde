"""Limits before spending: a CLUSTER_NAME (or NETWORK_NAME) whose derived names break a Google
limit is refused by `rltui check` (and so by `up --check` and the Configure screen), one line per
broken name quoting it and the limit; a domain-scoped PROJECT_ID is refused in one line by every
command that reads env.sh, never with a traceback."""

from __future__ import annotations

import pytest

from rltui.config import ConfigError, check_field, parse_config
from rltui.names import derived_names, too_long

GOOD = {"PROJECT_ID": "team-rl-sandbox-42", "ZONE": "us-east1-b", "REGION": "us-east1",
        "CLUSTER_NAME": "ray-a4-gpu-spot", "DEVICE_TYPE": "b200-8"}
FAR = {"ZONE": "northamerica-northeast1-b", "REGION": "northamerica-northeast1"}


def problems(**changes: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config({**GOOD, **changes})
    return [str(p) for p in info.value.problems]


def test_the_gpu_pool_name_allows_18_characters_and_not_19() -> None:
    parse_config({**GOOD, "CLUSTER_NAME": "c" * 18})
    lines = problems(CLUSTER_NAME="c" * 19)
    assert lines == [f"CLUSTER_NAME: '{'c' * 19}' is too long: xpk's GPU node pool would be"
                     f" 'a4-highgpu-8g-{'c' * 19}-a4-pool', 41 characters; GKE node pool names are at most"
                     " 40 characters (CLUSTER_NAME at most 18 here)"]


def test_every_broken_name_is_reported_at_once_one_line_each() -> None:
    c = "r" * 40
    lines = problems(CLUSTER_NAME=c, **FAR)
    assert all(line.startswith(f"CLUSTER_NAME: '{c}' is too long: ") for line in lines)
    quoted = {line.split(" would be ")[1].split("'")[1] for line in lines}
    assert quoted == {f"google-managed-services-{c}-net-0", f"a4-highgpu-8g-{c}-a4-pool",
                      f"{c}-net-0-fw-allow-internal-traffic", f"{c}-net-0-nat-ips-northamerica-northeast1-0"}
    assert any("Compute Engine names are at most 63 characters (CLUSTER_NAME at most 31 here)" in line
               for line in lines)


def test_the_nat_ips_name_depends_on_the_region() -> None:
    gce = {d.name for d in too_long("p", "northamerica-northeast1", "n" * 24, "n" * 24 + "-net-0", "b200-8")}
    assert f"{'n' * 24}-net-0-nat-ips-northamerica-northeast1-0" in gce
    assert not [d for d in too_long("p", "us-east1", "n" * 24, "n" * 24 + "-net-0", "b200-8")
                if "NAT IP" in d.what]


def test_the_blueprints_names_are_the_contracts() -> None:
    names = {d.name for d in derived_names("team-rl-sandbox-42", "us-east1", "c", "c-net-0", "b200-8")}
    assert {"c-net-0", "c-net-1", "c-rdma-net", "c-sub-0", "c-rdma-sub-7", "c-internal-1",
            "c-net-1-fw-allow-iap-ingress", "c-net-1-router", "c-net-1-nat-ips-us-east1-1",
            "a4-highgpu-8g-c-a4-pool", "google-managed-services-c-net-0"} <= names
    label = next(d for d in derived_names("p", "us-east1", "c", "c-net-0", "b200-8") if "ghpc_deployment" in d.what)
    assert label.name.startswith("c-") and len(label.name) == 7 and label.limit == 63


def test_a_long_network_name_is_reported_on_network_name() -> None:
    net = "n" * 45
    lines = problems(NETWORK_NAME=net)
    # b200-8's nodes are on <CLUSTER_NAME>-net-0 (config.py _network_problems): both at once
    assert lines == [f"NETWORK_NAME: {net} is not ray-a4-gpu-spot-net-0, the network xpk puts"
                     " b200-8 nodes on: Lustre on another network cannot be mounted from them"
                     " (set NETWORK_NAME to ${CLUSTER_NAME}-net-0)",
                     f"NETWORK_NAME: '{net}' is too long: rltui's IP range would be"
                     f" 'google-managed-services-{net}', 69 characters; Compute Engine names are at most"
                     " 63 characters (NETWORK_NAME at most 39 here)"]


def test_the_configure_screen_shows_every_problem_of_the_field() -> None:
    message = check_field("CLUSTER_NAME", "r" * 40, {**GOOD, **FAR})
    assert message is not None
    assert "a4-highgpu-8g-" in message and "fw-allow-internal-traffic" in message and "; " in message
    assert check_field("CLUSTER_NAME", "c" * 18, GOOD) is None


def test_rltui_check_refuses_a_long_cluster_name_in_one_line_per_problem(tmp_path, capsys) -> None:
    from rltui.cli import main

    env = tmp_path / "env.sh"
    env.write_text("".join(f'export {k}="{v}"\n' for k, v in {**GOOD, "CLUSTER_NAME": "r" * 40, **FAR}.items()))
    assert main(["check", "--env", str(env)]) == 2
    out = capsys.readouterr()
    err = out.err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("CLUSTER_NAME: ") for line in err), err
    assert "Traceback" not in out.err + out.out


@pytest.mark.parametrize("project", ["example.com:rl-proj", "example.com:proj"])
@pytest.mark.parametrize("argv", [["check"], ["status", "--sandbox"], ["status", "--sandbox", "--json"],
                                  ["up", "--check", "--sandbox"]])
def test_a_domain_scoped_project_is_refused_in_one_line_everywhere(argv, project, tmp_path, capsys) -> None:
    from rltui.cli import main

    env = tmp_path / "env.sh"
    env.write_text("".join(f'export {k}="{v}"\n' for k, v in {**GOOD, "PROJECT_ID": project}.items()))
    assert main([*argv, "--env", str(env)]) == 2
    out = capsys.readouterr()
    err = out.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"PROJECT_ID: '{project}' is a domain-scoped project ID"), err
    assert "Traceback" not in out.err + out.out
