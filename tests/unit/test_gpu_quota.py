"""Which Cloud Quotas entry is the Spot GPU limit for a family in a region (cloud/quotas.py
family_limit): the most specific dimensions info that applies, as QuotaInfo orders them."""

from __future__ import annotations

from types import SimpleNamespace as NS

from rltui.cloud.quotas import family_limit


def entry(dims: dict[str, str], value: int, where: tuple[str, ...] = ("us-east1", "us-central1")) -> NS:
    return NS(dimensions=dims, details=NS(value=value), applicable_locations=list(where))


INFO = NS(quota_id="PREEMPTIBLE-GPUS-PER-GPU-FAMILY-per-project-region", dimensions_infos=[
    entry({"region": "us-central1", "gpu_family": "NVIDIA_B200"}, 64),
    entry({"gpu_family": "NVIDIA_B200"}, 16),
    entry({"region": "us-east1"}, 4),
    entry({}, 0)])


def test_the_most_specific_entry_that_applies_wins() -> None:
    assert family_limit([INFO], "us-central1", "NVIDIA_B200") == (64.0, INFO.quota_id)
    assert family_limit([INFO], "us-east1", "NVIDIA_B200") == (16.0, INFO.quota_id)
    assert family_limit([INFO], "us-east1", "NVIDIA_H100") == (4.0, INFO.quota_id)
    assert family_limit([INFO], "us-central1", "NVIDIA_H100") == (0.0, INFO.quota_id)


def test_an_entry_for_other_locations_does_not_apply() -> None:
    assert family_limit([INFO], "europe-west4", "NVIDIA_B200") is None
    assert family_limit([], "us-east1", "NVIDIA_B200") is None
