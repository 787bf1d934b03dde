"""Selectors, patches and AGE formatting: the pure parts of the fake API server."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rltui_sandbox.kube.patches import PatchError, json_patch, merge_patch, strategic_merge
from rltui_sandbox.kube.selectors import SelectorError, field_matcher, label_matcher
from rltui_sandbox.kube.tables import human_duration

HEAD = {"metadata": {"name": "h", "labels": {"ray.io/cluster": "rc", "ray.io/node-type": "head"}}}
WORKER = {"metadata": {"name": "w", "labels": {"ray.io/cluster": "rc", "ray.io/node-type": "worker",
                                               "ray.io/group": "gpu-worker-group"}}}
BARE = {"metadata": {"name": "b"}}


@pytest.mark.parametrize(("selector", "matches"), [
    ("", ["h", "w", "b"]),
    ("ray.io/node-type=head", ["h"]),
    ("ray.io/node-type==worker,ray.io/cluster=rc", ["w"]),
    ("ray.io/node-type!=head", ["w", "b"]),
    ("ray.io/node-type in (head,worker)", ["h", "w"]),
    ("ray.io/node-type notin (worker)", ["h", "b"]),
    ("ray.io/group", ["w"]),
    ("!ray.io/group", ["h", "b"]),
    (" ray.io/cluster = rc , ray.io/node-type in ( worker ) ", ["w"]),
])
def test_label_selectors(selector: str, matches: list[str]) -> None:
    match = label_matcher(selector)
    assert [o["metadata"]["name"] for o in (HEAD, WORKER, BARE) if match(o)] == matches


@pytest.mark.parametrize("selector", ["a in b", "=x", "a=b=c", "a in (b", "a!!=b"])
def test_bad_label_selectors_are_refused(selector: str) -> None:
    with pytest.raises(SelectorError):
        label_matcher(selector)


def test_field_selectors() -> None:
    pod = {"metadata": {"name": "p", "namespace": "default"}, "status": {"phase": "Running"}}
    allowed = {"metadata.name", "status.phase", "spec.nodeName"}
    assert field_matcher("status.phase=Running,metadata.name==p", allowed)(pod)
    assert not field_matcher("status.phase!=Running", allowed)(pod)
    assert field_matcher("spec.nodeName=", allowed)(pod)  # absent reads as ""
    with pytest.raises(SelectorError, match="field label not supported: spec.bogus"):
        field_matcher("spec.bogus=1", allowed)


def test_merge_patch_rfc7386() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
    assert merge_patch(target, {"a": "z", "c": {"f": None}, "l": [3]}) == {"a": "z", "c": {"d": "e"}, "l": [3]}
    assert target == {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}  # untouched


def test_json_patch_operations() -> None:
    doc = {"spec": {"workerGroupSpecs": [{"groupName": "g", "replicas": 8}], "a~b/c": 1}}
    out = json_patch(doc, [
        {"op": "test", "path": "/spec/workerGroupSpecs/0/replicas", "value": 8},
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 4},
        {"op": "add", "path": "/spec/workerGroupSpecs/-", "value": {"groupName": "h"}},
        {"op": "copy", "from": "/spec/a~0b~1c", "path": "/spec/copied"},
        {"op": "move", "from": "/spec/copied", "path": "/spec/moved"},
        {"op": "remove", "path": "/spec/a~0b~1c"},
    ])
    assert out == {"spec": {"workerGroupSpecs": [{"groupName": "g", "replicas": 4}, {"groupName": "h"}], "moved": 1}}
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "test", "path": "/spec/a~0b~1c", "value": 2}])
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "replace", "path": "/spec/missing/x", "value": 2}])


def test_strategic_merge_directives_kubectl_sends() -> None:
    pod = {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}],
                    "volumes": [{"name": "v"}], "tolerations": [{"key": "x"}]},
           "metadata": {"finalizers": ["f1"]}}
    patch = {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
             "spec": {"containers": [{"name": "a", "image": "3"}, {"name": "b", "$patch": "delete"}],
                      "tolerations": [{"key": "y"}]},
             "metadata": {"finalizers": ["f2"]}}
    patch["spec"]["$setElementOrder/containers"] = patch.pop("$setElementOrder/containers")
    out = strategic_merge(pod, patch)
    assert out["spec"]["containers"] == [{"name": "a", "image": "3"}]
    assert out["spec"]["volumes"] == [{"name": "v"}]
    assert out["spec"]["tolerations"] == [{"key": "y"}]  # no merge key: replaced
    assert out["metadata"]["finalizers"] == ["f1", "f2"]
    ports = strategic_merge({"ports": [{"containerPort": 8265, "name": "dashboard"}]},
                            {"ports": [{"containerPort": 6379, "name": "gcs-server"}]})
    assert [p["containerPort"] for p in ports["ports"]] == [8265, 6379]
    assert strategic_merge({"a": {"b": 1}}, {"a": {"$patch": "replace", "c": 2}}) == {"a": {"c": 2}}
    removed = strategic_merge({"finalizers": ["a", "b"]}, {"$deleteFromPrimitiveList/finalizers": ["a"]})
    assert removed == {"finalizers": ["b"]}


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                     max_leaves=10)


@given(st.dictionaries(st.text(max_size=3), _json, max_size=4), st.dictionaries(st.text(max_size=3), _json, max_size=4))
def test_merge_patch_is_idempotent(target: dict, patch: dict) -> None:
    once = merge_patch(target, patch)
    assert merge_patch(once, patch) == once


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (119, "119s"), (125, "2m5s"), (600, "10m"), (3 * 3600 + 600, "3h10m"),
    (30 * 3600, "30h"), (50 * 3600, "2d2h"), (9 * 86400, "9d"), (800 * 86400, "2y70d")])
def test_age_like_kubectl(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text
