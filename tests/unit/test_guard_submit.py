"""The budget guard from rltui's side, without a cloud: `submit`'s two flags and their refusals, the
supervisor's objects with a guard (the KSA's Workload Identity annotation, the one ClusterRole it
gets), spec.json's `guard` (no secret), the IAM policy edits (only rltui's member, never another's
binding), and the line `status` and the Monitor show."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rltui import manifests_supervisor as ms
from rltui.cloud.iam import add_member, remove_member
from rltui.config import parse_config
from rltui.plan.guard import GUARD_ROLE, description, guard_line, guard_pending, is_rltuis, ksa_member

REPO = Path(__file__).resolve().parents[2]
JOB = "rltui-20261201-093000-ab12cd"
GSA = "rltui-guard-0123abcd@team-rl-sandbox-42.iam.gserviceaccount.com"


def _cfg():
    return parse_config({"PROJECT_ID": "team-rl-sandbox-42", "HF_TOKEN": "hf_FAKEtokenDoNotShow0123456789"})


def _guard() -> dict:
    return {"down_after": "gpus", "max_cost_usd": 500.0, "gpu_pools": ["a4-highgpu-8g-ray-a4-gpu-spot-a4-pool"],
            "gpu_node_hour_usd": 39.63, "currency": "USD", "project": "team-rl-sandbox-42", "location": "us-east1",
            "cluster": "ray-a4-gpu-spot", "container_api": "https://container.googleapis.com/", "time_scale": 1.0,
            "service_account": GSA}


def _submit(*flags: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env_sh = tmp_path / "env.sh"
    env_sh.write_text((REPO / "assets" / "sandbox.env.sh").read_text())
    env_sh.chmod(0o600)
    return subprocess.run([sys.executable, "-m", "rltui.cli", "submit", "--env", str(env_sh), *flags],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path)})


@pytest.mark.parametrize(("flags", "says"), [
    (("--max-cost", "lots"), "--max-cost: 'lots' is not an amount in USD"),
    (("--max-cost", "0"), "--max-cost: '0': the budget must be more than 0 USD"),
    (("--max-cost", "nan"), "the budget must be more than 0 USD"),
    (("--down-after", "cpus"), "--down-after: invalid choice: 'cpus' (choose from 'gpus')"),
    (("--no-recover", "--down-after", "gpus"), "--down-after does not apply to submit --no-recover"),
])
def test_a_bad_guard_flag_is_one_line_naming_it_and_exit_2(flags, says, tmp_path) -> None:
    """Refused before anything is asked of a cloud: no sandbox, no credentials needed."""
    out = _submit(*flags, tmp_path=tmp_path)
    assert out.returncode == 2, out.stderr
    assert says in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "Traceback" not in out.stderr


def test_the_budget_reads_as_a_dollar_amount() -> None:
    from rltui.cli import usd

    assert usd("500") == 500.0 and usd("$1,250.50") == 1250.5


def test_with_a_guard_the_supervisor_acts_as_its_google_account_and_may_list_nodes_only() -> None:
    cfg = _cfg()
    spec = ms.run_spec(cfg, JOB, entrypoint="bash run_nemo_rl.sh", runtime_env={}, metadata={}, submitted_at=1.0,
                       guard=_guard())
    objs = {o["kind"]: o for o in ms.supervisor_objects(cfg, JOB, spec, {})}
    assert objs["ServiceAccount"]["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": GSA}
    role = objs["ClusterRole"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]
    assert "namespace" not in role["metadata"]
    binding = objs["ClusterRoleBinding"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": ms.NAME, "namespace": ms.NAMESPACE}]
    # rltui down removes the supervisor's objects by their labels (plan/supervision.py).
    for obj in (role, binding):
        assert obj["metadata"]["labels"][ms.ROLE_LABEL] == ms.NAME
    run = next(o for o in ms.supervisor_objects(cfg, JOB, spec, {}) if o["metadata"]["name"] == ms.run_configmap(JOB))
    assert json.loads(run["data"]["spec.json"])["guard"] == _guard()  # an email, a price: no secret
    assert "guard.py" in ms.CODE_FILES


def test_without_a_guard_nothing_changes() -> None:
    cfg = _cfg()
    spec = ms.run_spec(cfg, JOB, entrypoint="x", runtime_env={}, metadata={}, submitted_at=1.0)
    kinds = [o["kind"] for o in ms.supervisor_objects(cfg, JOB, spec, {})]
    assert "ClusterRole" not in kinds and "guard" not in spec
    account = next(o for o in ms.supervisor_objects(cfg, JOB, spec, {}) if o["kind"] == "ServiceAccount")
    assert "annotations" not in account["metadata"]


def test_the_guard_account_name_fits_iam_and_is_one_per_cluster() -> None:
    import re

    a = ms.guard_account_id(_cfg())
    b = ms.guard_account_id(parse_config({"PROJECT_ID": "team-rl-sandbox-42", "CLUSTER_NAME": "other"}))
    for name in (a, b):  # iam v1 projects.serviceAccounts.create: 6-30, [a-z]([-a-z0-9]*[a-z0-9])
        assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])", name) and 6 <= len(name) <= 30
    assert a != b and a.startswith("rltui-guard-")
    assert is_rltuis({"description": description(_cfg())})
    assert not is_rltuis({"description": "made by hand"}) and not is_rltuis(None)


def test_the_ksa_principal_is_workload_identitys_form() -> None:
    assert ksa_member("team-rl-sandbox-42.svc.id.goog") == \
        "serviceAccount:team-rl-sandbox-42.svc.id.goog[default/rltui-supervisor]"


def test_policy_edits_touch_only_rltuis_member() -> None:
    me = f"serviceAccount:{GSA}"
    policy = {"etag": "BwE1", "version": 3, "bindings": [
        {"role": GUARD_ROLE, "members": ["user:ana@example.com"]},
        {"role": GUARD_ROLE, "members": ["group:ops@example.com"],
         "condition": {"title": "weekdays", "expression": "request.time.getDayOfWeek() < 5"}},
        {"role": "roles/viewer", "members": [me]}]}
    assert add_member(policy, GUARD_ROLE, me) and not add_member(policy, GUARD_ROLE, me)
    assert policy["bindings"][0]["members"] == ["user:ana@example.com", me]
    assert policy["bindings"][1]["members"] == ["group:ops@example.com"]  # the conditional one untouched
    assert remove_member(policy, GUARD_ROLE, me) and not remove_member(policy, GUARD_ROLE, me)
    assert policy["bindings"][0]["members"] == ["user:ana@example.com"]
    assert {"role": "roles/viewer", "members": [me]} in policy["bindings"], "another role's binding stays"
    assert (policy["etag"], policy["version"]) == ("BwE1", 3)
    lone = {"bindings": [{"role": GUARD_ROLE, "members": [me]}]}
    assert remove_member(lone, GUARD_ROLE, me) and lone["bindings"] == []


def test_the_guard_line_says_what_it_will_do_and_what_was_spent() -> None:
    pool = "np-gpu"
    watching = {"state": "watching", "down_after": "gpus", "limit_usd": 500.0, "spend_usd": 412.3,
                "currency": "USD", "pools": {pool: "present"}}
    assert guard_line(watching) == ("guard: deletes GPU pool np-gpu when the run ends or once ~$500 is spent"
                                    " (the job stopped first); spent ~$412 of $500")
    assert guard_line({**watching, "limit_usd": None}) == \
        "guard: deletes GPU pool np-gpu when the run ends; spent ~$412"
    assert guard_line({**watching, "state": "done", "pools": {pool: "deleted"}}) == \
        "guard: GPU pool np-gpu deleted; spent ~$412 of $500"
    failed = {**watching, "state": "failed", "message": "the guard may not delete node pool np-gpu: 403"}
    assert guard_line(failed).startswith("guard FAILED: the guard may not delete node pool np-gpu: 403")
    assert guard_pending(watching) and not guard_pending(failed) and guard_line({}) == ""
