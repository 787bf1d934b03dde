"""The real Cloud Monitoring clients read Lustre throughput and capacity from the sandbox."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
from google.api import metric_pb2
from google.api_core import exceptions
from google.cloud import monitoring_v3
from google.cloud.monitoring_v3.services.metric_service.transports import (
    MetricServiceGrpcAsyncIOTransport,
    MetricServiceGrpcTransport,
)
from google.protobuf import duration_pb2, timestamp_pb2

from rltui.sandbox.grpc_monitoring import CAPACITY_BYTES, READ_BYTES, USED_BYTES, WRITE_BYTES

MB = 1_000_000
Aligner = monitoring_v3.Aggregation.Aligner
FULL = monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.FULL
HEADERS = monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.HEADERS


@pytest.fixture
def client(port: int):
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield monitoring_v3.MetricServiceClient(transport=MetricServiceGrpcTransport(channel=channel))
    channel.close()


def ts(t: float) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromNanoseconds(int(t * 1e9))
    return out


def interval(start: float, end: float) -> monitoring_v3.TimeInterval:
    return monitoring_v3.TimeInterval(start_time=ts(start), end_time=ts(end))


def aggregation(aligner, period_s: int = 60) -> monitoring_v3.Aggregation:
    return monitoring_v3.Aggregation(
        alignment_period=duration_pb2.Duration(seconds=period_s), per_series_aligner=aligner)


def series(client, project: str, metric: str, start: float, end: float, agg=None,
           extra: str = "", **kw) -> list[monitoring_v3.TimeSeries]:
    request = monitoring_v3.ListTimeSeriesRequest(
        name=f"projects/{project}", filter=f'metric.type = "{metric}"{extra}',
        interval=interval(start, end), view=kw.pop("view", FULL), **kw)
    if agg is not None:
        request.aggregation = agg
    return list(client.list_time_series(request=request))


def seconds(t) -> float:
    return t.timestamp()


def write(path: Path, n: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x5a" * n)


def test_descriptors_are_discoverable_with_starts_with(client, key):
    found = list(client.list_metric_descriptors(request={
        "name": f"projects/{key[0]}", "filter": 'metric.type = starts_with("lustre.googleapis.com/")'}))
    types = {d.type: d for d in found}
    assert set(types) == {READ_BYTES, WRITE_BYTES, USED_BYTES, CAPACITY_BYTES}
    assert types[WRITE_BYTES].metric_kind == metric_pb2.MetricDescriptor.DELTA
    assert types[USED_BYTES].metric_kind == metric_pb2.MetricDescriptor.GAUGE
    assert all(d.unit == "By" and d.monitored_resource_types == ["lustre.googleapis.com/Instance"]
               for d in found)

    exact = list(client.list_metric_descriptors(request={
        "name": f"projects/{key[0]}", "filter": f'metric.type = "{READ_BYTES}"'}))
    assert [d.type for d in exact] == [READ_BYTES]
    other = list(client.list_metric_descriptors(request={
        "name": f"projects/{key[0]}", "filter": 'metric.type = starts_with("compute.googleapis.com/")'}))
    assert other == []

    got = client.get_metric_descriptor(name=f"projects/{key[0]}/metricDescriptors/{WRITE_BYTES}")
    assert got.type == WRITE_BYTES
    with pytest.raises(exceptions.NotFound):
        client.get_metric_descriptor(name=f"projects/{key[0]}/metricDescriptors/lustre.googleapis.com/nope")


def test_monitored_resource_descriptor_has_the_lustre_labels(client, key):
    found = list(client.list_monitored_resource_descriptors(request={"name": f"projects/{key[0]}"}))
    assert [d.type for d in found] == ["lustre.googleapis.com/Instance"]
    assert [label.key for label in found[0].labels] == ["resource_container", "location", "instance_id"]


def test_write_throughput_integrates_to_the_bytes_written(client, meter, key, lustre_dir):
    t0 = time.time() - 1
    write(lustre_dir / "checkpoints" / "step_10" / "policy.pt", 30 * MB)
    meter.sample()
    end = time.time() + 1

    [rate] = series(client, key[0], WRITE_BYTES, t0 - 120, end, aggregation(Aligner.ALIGN_RATE))
    assert rate.resource.type == "lustre.googleapis.com/Instance"
    assert dict(rate.resource.labels) == {
        "resource_container": key[0], "location": key[1], "instance_id": key[2]}
    assert rate.value_type == metric_pb2.MetricDescriptor.DOUBLE
    assert rate.unit == "By/s"
    ends = [seconds(p.interval.end_time) for p in rate.points]
    assert ends == sorted(ends, reverse=True)  # newest first
    assert ends[0] == pytest.approx(end, abs=1e-3)
    integral = sum(p.value.double_value * 60 for p in rate.points)
    assert integral == pytest.approx(30 * MB, rel=0.03)

    [raw] = series(client, key[0], WRITE_BYTES, t0 - 120, end)
    assert raw.value_type == metric_pb2.MetricDescriptor.INT64
    assert sum(p.value.int64_value for p in raw.points) == 30 * MB

    [delta] = series(client, key[0], WRITE_BYTES, t0 - 120, end, aggregation(Aligner.ALIGN_DELTA))
    assert sum(p.value.int64_value for p in delta.points) == 30 * MB


def test_rate_per_second_when_finer_alignment_is_allowed(serve, meter, key, lustre_dir):
    port = serve(min_alignment_s=1)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    client = monitoring_v3.MetricServiceClient(transport=MetricServiceGrpcTransport(channel=channel))
    t0 = meter.latest(key).t
    write(lustre_dir / "ckpt.pt", 30 * MB)
    meter.sample(now=t0 + 1)  # 30 MB in this second
    meter.sample(now=t0 + 2)  # nothing in the next
    [rate] = series(client, key[0], WRITE_BYTES, t0, t0 + 2, aggregation(Aligner.ALIGN_RATE, 1))
    values = [p.value.double_value for p in rate.points]
    assert values == pytest.approx([0.0, 30 * MB])
    channel.close()


def test_reading_back_shows_read_bytes(client, meter, key, lustre_dir):
    t0 = time.time() - 1
    write(lustre_dir / "step_5" / "optimizer.pt", 12 * MB)
    meter.sample()
    (lustre_dir / "step_5" / "optimizer.pt").read_bytes()  # resume from checkpoint
    meter.sample()
    end = time.time() + 1
    [delta] = series(client, key[0], READ_BYTES, t0 - 60, end, aggregation(Aligner.ALIGN_DELTA))
    assert sum(p.value.int64_value for p in delta.points) == 12 * MB


def test_capacity_used_and_total(client, meter, key, lustre_dir):
    write(lustre_dir / "a.bin", 7 * MB)
    write(lustre_dir / "sub" / "b.bin", 3 * MB)
    meter.sample()
    now = time.time() + 1
    [used] = series(client, key[0], USED_BYTES, now - 60, now)
    assert used.metric_kind == metric_pb2.MetricDescriptor.GAUGE
    assert used.points[0].value.int64_value == 10 * MB
    [total] = series(client, key[0], CAPACITY_BYTES, now - 60, now)
    assert total.points[0].value.int64_value == 9000 * 1024**3
    [peak] = series(client, key[0], USED_BYTES, now - 60, now, aggregation(Aligner.ALIGN_MAX))
    assert peak.points[0].value.int64_value == 10 * MB
    # The samples in the period: the empty folder when tracked, then 10 MB.
    [mean] = series(client, key[0], USED_BYTES, now - 60, now, aggregation(Aligner.ALIGN_MEAN))
    assert mean.value_type == metric_pb2.MetricDescriptor.DOUBLE
    assert mean.points[0].value.double_value == pytest.approx(5 * MB)


def test_interval_is_honoured(client, meter, key, lustre_dir):
    t0 = meter.latest(key).t
    for i in (10, 20, 30):
        write(lustre_dir / f"f{i}.bin", i * 1000)
        meter.sample(now=t0 + i)
    [raw] = series(client, key[0], WRITE_BYTES, t0 + 10, t0 + 20)  # (start, end]
    assert [(seconds(p.interval.start_time) - t0, seconds(p.interval.end_time) - t0)
            for p in raw.points] == [pytest.approx((10, 20), abs=1e-3)]
    assert [p.value.int64_value for p in raw.points] == [20_000]
    assert series(client, key[0], WRITE_BYTES, t0 + 31, t0 + 40)[0].points == []
    # Aligned data only counts what lies inside the interval.
    [delta] = series(client, key[0], WRITE_BYTES, t0 + 5, t0 + 125, aggregation(Aligner.ALIGN_DELTA))
    assert all(t0 + 5 <= seconds(p.interval.start_time) + 1e-3 for p in delta.points[:-1])
    assert sum(p.value.int64_value for p in delta.points) == 5_000 + 20_000 + 30_000


@pytest.mark.parametrize("bad_filter", [
    'resource.type = "lustre.googleapis.com/Instance"',
    'metric.type = starts_with("lustre.googleapis.com/")',
    f'metric.type = "{READ_BYTES}" AND metric.type = "{WRITE_BYTES}"',
    'metric.type = ',
])
def test_a_filter_without_exactly_one_metric_type_is_invalid(client, key, bad_filter):
    now = time.time()
    with pytest.raises(exceptions.InvalidArgument):
        list(client.list_time_series(name=f"projects/{key[0]}", filter=bad_filter,
                                     interval=interval(now - 60, now), view=FULL))


def test_invalid_aggregations_are_refused(client, key, lustre_dir):
    now = time.time()
    with pytest.raises(exceptions.InvalidArgument, match="at least 60"):
        series(client, key[0], WRITE_BYTES, now - 600, now, aggregation(Aligner.ALIGN_RATE, 30))
    with pytest.raises(exceptions.InvalidArgument, match="ALIGN_RATE"):
        series(client, key[0], USED_BYTES, now - 600, now, aggregation(Aligner.ALIGN_RATE))
    with pytest.raises(exceptions.InvalidArgument):
        series(client, key[0], WRITE_BYTES, now, now - 60)


def test_resource_filter_paging_and_headers(client, meter, key, lustre_dir, tmp_path):
    for name in ("lustre-b", "lustre-c"):
        meter.track((key[0], key[1], name), tmp_path / name, 18000)
    meter.track(("other-project", key[1], "theirs"), tmp_path / "theirs", 9000)
    now = time.time() + 1
    all_three = series(client, key[0], USED_BYTES, now - 60, now, page_size=1)
    assert sorted(s.resource.labels["instance_id"] for s in all_three) == [
        "lustre-b", "lustre-c", key[2]]
    pages = list(client.list_time_series(request=monitoring_v3.ListTimeSeriesRequest(
        name=f"projects/{key[0]}", filter=f'metric.type = "{USED_BYTES}"',
        interval=interval(now - 60, now), page_size=2)).pages)
    assert [len(p.time_series) for p in pages] == [2, 1]

    only_b = series(client, key[0], USED_BYTES, now - 60, now,
                    extra=' AND resource.labels.instance_id = "lustre-b"')
    assert [s.resource.labels["instance_id"] for s in only_b] == ["lustre-b"]

    headers = series(client, key[0], USED_BYTES, now - 60, now, view=HEADERS)
    assert len(headers) == 3 and all(len(s.points) == 0 for s in headers)


def test_project_instances_decides_what_a_project_sees(serve, meter, key, lustre_dir, tmp_path):
    meter.track((key[0], key[1], "not-listed"), tmp_path / "x", 9000)
    port = serve(project_instances=lambda p: [key] if p in (key[0], "123456789") else [])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    client = monitoring_v3.MetricServiceClient(transport=MetricServiceGrpcTransport(channel=channel))
    now = time.time() + 1
    by_number = series(client, "123456789", USED_BYTES, now - 60, now)
    assert [s.resource.labels["instance_id"] for s in by_number] == [key[2]]
    assert series(client, "someone-else", USED_BYTES, now - 60, now) == []
    channel.close()


def test_write_methods_are_unimplemented(client, key):
    with pytest.raises(exceptions.MethodNotImplemented):
        client.create_time_series(name=f"projects/{key[0]}", time_series=[monitoring_v3.TimeSeries()])


async def test_async_client_reads_the_same_series(port, meter, key, lustre_dir):
    t0 = time.time() - 1
    write(lustre_dir / "ckpt.pt", 4 * MB)
    meter.sample()
    end = time.time() + 1
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    client = monitoring_v3.MetricServiceAsyncClient(
        transport=MetricServiceGrpcAsyncIOTransport(channel=channel))
    try:
        pager = await client.list_time_series(request=monitoring_v3.ListTimeSeriesRequest(
            name=f"projects/{key[0]}", filter=f'metric.type = "{WRITE_BYTES}"',
            interval=interval(t0 - 60, end), aggregation=aggregation(Aligner.ALIGN_RATE)))
        found = [s async for s in pager]
        assert len(found) == 1
        assert sum(p.value.double_value * 60 for p in found[0].points) == pytest.approx(4 * MB, rel=0.03)
        descriptors = await client.list_metric_descriptors(request={
            "name": f"projects/{key[0]}", "filter": 'metric.type = starts_with("lustre.googleapis.com/")'})
        assert len([d async for d in descriptors]) == 4
    finally:
        await channel.close()
