"""The real Cloud Monitoring clients read Managed Lustre's metrics from the sandbox, as Google
documents them: one series per storage target, summed with a cross-series reducer."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
from google.api import launch_stage_pb2, metric_pb2
from google.api_core import exceptions
from google.cloud import monitoring_v3
from google.cloud.monitoring_v3.services.metric_service.transports import (
    MetricServiceGrpcAsyncIOTransport,
    MetricServiceGrpcTransport,
)
from google.protobuf import duration_pb2, timestamp_pb2

from rltui_sandbox import lustre_meter

P = "lustre.googleapis.com/instance/"
READ_BYTES, WRITE_BYTES = P + "read_bytes_total", P + "write_bytes_total"
CAPACITY, FREE, AVAILABLE = P + "capacity_bytes", P + "free_bytes", P + "available_bytes"
MB = 1_000_000
Aligner = monitoring_v3.Aggregation.Aligner
Reducer = monitoring_v3.Aggregation.Reducer
FULL = monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.FULL
HEADERS = monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.HEADERS
OSTS = [f"lustre-OST000{i}" for i in range(4)]
MDT = "lustre-MDT0000"


@pytest.fixture
def client(port: int):
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield monitoring_v3.MetricServiceClient(transport=MetricServiceGrpcTransport(channel=channel))
    channel.close()


@pytest.fixture
def past(meter, key, tmp_path: Path):
    """The codelab's instance tracked an hour ago: (t0, folder); samples are pinned after t0."""
    t0 = time.time() - 3600
    folder = tmp_path / "past"
    meter.track(key, folder, 9000, now=t0)
    return t0, folder


def ts(t: float) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromNanoseconds(int(t * 1e9))
    return out


def interval(start: float, end: float) -> monitoring_v3.TimeInterval:
    return monitoring_v3.TimeInterval(start_time=ts(start), end_time=ts(end))


def aggregation(aligner, period_s: int = 60, reducer=None, group_by=()) -> monitoring_v3.Aggregation:
    agg = monitoring_v3.Aggregation(alignment_period=duration_pb2.Duration(seconds=period_s),
                                    per_series_aligner=aligner, group_by_fields=list(group_by))
    if reducer is not None:
        agg.cross_series_reducer = reducer
    return agg


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


def write_on_every_ost(folder: Path, size: int) -> dict[int, int]:
    """Write files of `size` bytes until each of the 4 OSTs holds one; bytes per OST index."""
    per_ost: dict[int, int] = {}
    n = 0
    while len(per_ost) < 4:
        path = folder / "ckpt" / f"shard_{n}.pt"
        write(path, size)
        ost = lustre_meter.ost_of(path.stat().st_ino)
        per_ost[ost] = per_ost.get(ost, 0) + size
        n += 1
    return per_ost


def test_descriptors_are_the_documented_ones(client, key):
    found = list(client.list_metric_descriptors(request={
        "name": f"projects/{key[0]}", "filter": 'metric.type = starts_with("lustre.googleapis.com/")'}))
    types = {d.type: d for d in found}
    assert set(types) == {P + n for n in (
        "read_bytes_total", "write_bytes_total", "read_samples_total", "write_samples_total",
        "capacity_bytes", "free_bytes", "available_bytes", "connected_clients", "inodes_free",
        "inodes_maximum", "io_time_milliseconds_total", "metadata_operations_total")}
    Kind = metric_pb2.MetricDescriptor
    for name in (READ_BYTES, WRITE_BYTES):
        d = types[name]
        assert (d.metric_kind, d.value_type, d.unit) == (Kind.DELTA, Kind.INT64, "By")
        assert [label.key for label in d.labels] == ["component", "operation", "target"]
    for name in (CAPACITY, FREE, AVAILABLE):
        d = types[name]
        assert (d.metric_kind, d.value_type, d.unit) == (Kind.GAUGE, Kind.INT64, "By")
        assert [label.key for label in d.labels] == ["component", "target"]
    assert types[P + "write_samples_total"].unit == "{operation}"
    assert types[P + "inodes_free"].unit == "{inode}"
    assert all(d.launch_stage == launch_stage_pb2.BETA for d in found)
    assert all(d.monitored_resource_types == ["lustre.googleapis.com/Instance"] for d in found)
    assert types[FREE].metadata.sample_period.seconds == 60
    assert types[FREE].metadata.ingest_delay.seconds == 120

    got = client.get_metric_descriptor(name=f"projects/{key[0]}/metricDescriptors/{WRITE_BYTES}")
    assert got.type == WRITE_BYTES
    for invented in ("instance/capacity/used_bytes", "instance/write_bytes_count"):
        with pytest.raises(exceptions.NotFound):
            client.get_metric_descriptor(name=f"projects/{key[0]}/metricDescriptors/lustre.googleapis.com/{invented}")


def test_monitored_resource_descriptor_has_the_lustre_labels(client, key):
    found = list(client.list_monitored_resource_descriptors(request={"name": f"projects/{key[0]}"}))
    assert [d.type for d in found] == ["lustre.googleapis.com/Instance"]
    assert [label.key for label in found[0].labels] == ["resource_container", "location", "instance_id"]


def test_one_series_per_storage_target(client, meter, key, past):
    t0, folder = past
    per_ost = write_on_every_ost(folder, 2 * MB)
    meter.sample(now=t0 + 60)

    free = series(client, key[0], FREE, t0, t0 + 120)
    assert sorted((s.metric.labels["component"], s.metric.labels["target"]) for s in free) == \
        [("mdt", MDT)] + [("ost", t) for t in OSTS]
    assert all(dict(s.resource.labels) == {"resource_container": key[0], "location": key[1],
                                           "instance_id": key[2]} for s in free)

    written = series(client, key[0], WRITE_BYTES, t0, t0 + 120)
    assert len(written) == 4
    by_target = {s.metric.labels["target"]: s for s in written}
    assert set(by_target) == set(OSTS)
    for i, target in enumerate(OSTS):
        s = by_target[target]
        assert dict(s.metric.labels) == {"component": "ost", "operation": "write", "target": target}
        [point] = s.points  # one DELTA point for the sampling period (t0, t0 + 60]
        assert point.value.int64_value == per_ost[i]
        assert (seconds(point.interval.start_time), seconds(point.interval.end_time)) == \
            pytest.approx((t0, t0 + 60), abs=1e-3)


def test_reduce_sum_gives_the_instance_rate(client, meter, key, past):
    t0, folder = past
    per_ost = write_on_every_ost(folder, 3 * MB)
    meter.sample(now=t0 + 60)
    write(folder / "late.pt", 5 * MB)
    meter.sample(now=t0 + 120)
    total = sum(per_ost.values()) + 5 * MB

    [summed] = series(client, key[0], WRITE_BYTES, t0, t0 + 180,
                      aggregation(Aligner.ALIGN_RATE, 60, Reducer.REDUCE_SUM))
    assert dict(summed.metric.labels) == {} and dict(summed.resource.labels) == {}
    assert summed.metric_kind == metric_pb2.MetricDescriptor.GAUGE
    assert summed.value_type == metric_pb2.MetricDescriptor.DOUBLE
    assert summed.unit == "By/s"
    assert sum(p.value.double_value * 60 for p in summed.points) == pytest.approx(total)
    assert [round(p.value.double_value * 60) for p in summed.points] == [5 * MB, sum(per_ost.values())]

    [by_instance] = series(client, key[0], WRITE_BYTES, t0, t0 + 180,
                           aggregation(Aligner.ALIGN_DELTA, 60, Reducer.REDUCE_SUM,
                                       ["resource.label.instance_id"]))
    assert dict(by_instance.resource.labels) == {"instance_id": key[2]}
    assert sum(p.value.int64_value for p in by_instance.points) == total


def test_used_is_capacity_minus_free_over_the_osts(client, meter, key, past):
    t0, folder = past
    write(folder / "a.bin", 7 * MB)
    write(folder / "sub" / "b.bin", 3 * MB)
    meter.sample(now=t0 + 60)
    osts = ' AND metric.labels.component = "ost"'
    mean_sum = aggregation(Aligner.ALIGN_MEAN, 60, Reducer.REDUCE_SUM)
    [capacity] = series(client, key[0], CAPACITY, t0 + 1, t0 + 61, mean_sum, extra=osts)
    [free] = series(client, key[0], FREE, t0 + 1, t0 + 61, mean_sum, extra=osts)
    used = capacity.points[0].value.double_value - free.points[0].value.double_value
    assert used == pytest.approx(10 * MB)
    # The OSTs hold the data capacity; the MDT is provisioned on top of it... within the instance.
    [all_targets] = series(client, key[0], CAPACITY, t0 + 1, t0 + 61, mean_sum)
    assert all_targets.points[0].value.double_value == pytest.approx(9000 * 1024**3, rel=1e-6)
    [available] = series(client, key[0], AVAILABLE, t0 + 1, t0 + 61, mean_sum, extra=osts)
    assert available.points[0].value.double_value <= free.points[0].value.double_value
    assert series(client, key[0], P + "capacity/used_bytes", t0, t0 + 61) == []  # no such metric


def test_points_are_visible_only_after_the_delay(serve, meter, key, lustre_dir):
    port = serve(visibility_delay_s=0.8, min_alignment_s=1)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    client = monitoring_v3.MetricServiceClient(transport=MetricServiceGrpcTransport(channel=channel))
    write(lustre_dir / "ckpt.pt", 4 * MB)
    meter.sample()
    sampled = time.time()

    def written():
        now = time.time()
        return series(client, key[0], WRITE_BYTES, now - 600, now)

    assert written() == []  # sampled, not yet visible
    time.sleep(max(0.0, sampled + 0.9 - time.time()))
    assert sum(p.value.int64_value for s in written() for p in s.points) == 4 * MB
    channel.close()


def test_speed_scales_the_delay_and_the_minimum_period(serve, meter, key, lustre_dir):
    port = serve(speed=60)  # 120 reference seconds = 2 real seconds; 60 = 1
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    client = monitoring_v3.MetricServiceClient(transport=MetricServiceGrpcTransport(channel=channel))
    now = time.time()
    assert series(client, key[0], FREE, now - 1, now) == []  # tracked just now: still hidden
    series(client, key[0], FREE, now - 60, now, aggregation(Aligner.ALIGN_MEAN, 1))
    with pytest.raises(exceptions.InvalidArgument, match="at least 1 seconds"):
        series(client, key[0], FREE, now - 60, now, monitoring_v3.Aggregation(
            alignment_period=duration_pb2.Duration(nanos=500_000_000), per_series_aligner=Aligner.ALIGN_MEAN))
    channel.close()


def test_no_points_while_there_is_no_io(client, meter, key, past):
    t0, folder = past
    for i in range(1, 4):
        meter.sample(now=t0 + 60 * i)
    for metric in (WRITE_BYTES, READ_BYTES, P + "write_samples_total", P + "metadata_operations_total"):
        assert series(client, key[0], metric, t0, t0 + 240) == []
        assert series(client, key[0], metric, t0, t0 + 240, aggregation(Aligner.ALIGN_RATE)) == []
    assert len(series(client, key[0], CAPACITY, t0, t0 + 240)) == 5  # gauges are always sampled
    # I/O on one OST only: the other three have no series.
    write(folder / "one.bin", MB)
    meter.sample(now=t0 + 300)
    [only] = series(client, key[0], WRITE_BYTES, t0, t0 + 360)
    assert only.metric.labels["target"] == OSTS[lustre_meter.ost_of((folder / "one.bin").stat().st_ino)]


def test_reads_and_metadata_operations(client, meter, key, past):
    t0, folder = past
    write(folder / "step_5" / "optimizer.pt", 12 * MB)
    meter.sample(now=t0 + 60)
    (folder / "step_5" / "optimizer.pt").read_bytes()  # resume from checkpoint
    meter.sample(now=t0 + 120)
    [read] = series(client, key[0], READ_BYTES, t0, t0 + 180,
                    aggregation(Aligner.ALIGN_DELTA, 60, Reducer.REDUCE_SUM))
    assert sum(p.value.int64_value for p in read.points) == 12 * MB
    ops = series(client, key[0], P + "metadata_operations_total", t0, t0 + 180)
    seen = {s.metric.labels["operation"] for s in ops}
    assert {"mknod", "mkdir", "open", "close"} <= seen
    assert all(s.metric.labels["component"] == "mdt" and s.metric.labels["target"] == MDT for s in ops)
    [samples] = series(client, key[0], P + "write_samples_total", t0, t0 + 180,
                       aggregation(Aligner.ALIGN_DELTA, 60, Reducer.REDUCE_SUM))
    assert sum(p.value.int64_value for p in samples.points) == 12  # one per started MiB


def test_interval_is_honoured(client, meter, key, past):
    t0, folder = past
    for i in (10, 20, 30):
        write(folder / f"f{i}.bin", i * 1000)
        meter.sample(now=t0 + i)
    [raw] = series(client, key[0], WRITE_BYTES, t0 + 10, t0 + 20,
                   aggregation(Aligner.ALIGN_DELTA, 60, Reducer.REDUCE_SUM))
    assert sum(p.value.int64_value for p in raw.points) == pytest.approx(20_000, abs=1)
    unaligned = series(client, key[0], WRITE_BYTES, t0 + 10, t0 + 20)  # (start, end]
    assert [(seconds(p.interval.start_time) - t0, seconds(p.interval.end_time) - t0)
            for s in unaligned for p in s.points] == [pytest.approx((10, 20), abs=1e-3)]
    assert series(client, key[0], WRITE_BYTES, t0 + 31, t0 + 40) == []  # no data, no series
    [delta] = series(client, key[0], WRITE_BYTES, t0 + 5, t0 + 125,
                     aggregation(Aligner.ALIGN_DELTA, 60, Reducer.REDUCE_SUM))
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


def test_malformed_aggregations_are_refused_like_the_real_api(client, key, lustre_dir):
    now = time.time()
    with pytest.raises(exceptions.InvalidArgument) as err:
        series(client, key[0], CAPACITY, now - 600, now, aggregation(Aligner.ALIGN_RATE))
    assert err.value.message == ('Field aggregation.perSeriesAligner had an invalid value of "ALIGN_RATE": '
                                 "The aligner cannot be applied to metrics with kind GAUGE and value type INT64.")
    with pytest.raises(exceptions.InvalidArgument, match="at least 60"):
        series(client, key[0], WRITE_BYTES, now - 600, now, aggregation(Aligner.ALIGN_RATE, 30))
    with pytest.raises(exceptions.InvalidArgument, match="ALIGN_NONE"):
        series(client, key[0], WRITE_BYTES, now - 600, now,
               monitoring_v3.Aggregation(cross_series_reducer=Reducer.REDUCE_SUM))
    with pytest.raises(exceptions.InvalidArgument, match="alignmentPeriod"):
        series(client, key[0], WRITE_BYTES, now - 600, now,
               monitoring_v3.Aggregation(per_series_aligner=Aligner.ALIGN_RATE))
    with pytest.raises(exceptions.InvalidArgument):
        series(client, key[0], WRITE_BYTES, now, now - 60)


def test_resource_filter_paging_and_headers(client, meter, key, lustre_dir, tmp_path):
    for name in ("lustre-b", "lustre-c"):
        meter.track((key[0], key[1], name), tmp_path / name, 18000)
    meter.track(("other-project", key[1], "theirs"), tmp_path / "theirs", 9000)
    now = time.time() + 1
    mdt = ' AND metric.labels.component = "mdt"'
    all_three = series(client, key[0], FREE, now - 60, now, extra=mdt, page_size=1)
    assert sorted(s.resource.labels["instance_id"] for s in all_three) == ["lustre-b", "lustre-c", key[2]]
    pages = list(client.list_time_series(request=monitoring_v3.ListTimeSeriesRequest(
        name=f"projects/{key[0]}", filter=f'metric.type = "{FREE}"{mdt}',
        interval=interval(now - 60, now), page_size=2)).pages)
    assert [len(p.time_series) for p in pages] == [2, 1]

    only_b = series(client, key[0], FREE, now - 60, now,
                    extra=' AND resource.labels.instance_id = "lustre-b"')
    assert {s.resource.labels["instance_id"] for s in only_b} == {"lustre-b"} and len(only_b) == 5

    headers = series(client, key[0], FREE, now - 60, now, view=HEADERS)
    assert len(headers) == 15 and all(len(s.points) == 0 for s in headers)


def test_project_instances_decides_what_a_project_sees(serve, meter, key, lustre_dir, tmp_path):
    meter.track((key[0], key[1], "not-listed"), tmp_path / "x", 9000)
    port = serve(project_instances=lambda p: [key] if p in (key[0], "123456789") else [],
                 visibility_delay_s=0)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    client = monitoring_v3.MetricServiceClient(transport=MetricServiceGrpcTransport(channel=channel))
    now = time.time() + 1
    by_number = series(client, "123456789", FREE, now - 60, now)
    assert {s.resource.labels["instance_id"] for s in by_number} == {key[2]}
    assert series(client, "someone-else", FREE, now - 60, now) == []
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
            interval=interval(t0 - 60, end),
            aggregation=aggregation(Aligner.ALIGN_RATE, 60, Reducer.REDUCE_SUM)))
        found = [s async for s in pager]
        assert len(found) == 1
        assert sum(p.value.double_value * 60 for p in found[0].points) == pytest.approx(4 * MB, rel=0.03)
        descriptors = await client.list_metric_descriptors(request={
            "name": f"projects/{key[0]}", "filter": 'metric.type = starts_with("lustre.googleapis.com/")'})
        assert len([d async for d in descriptors]) == 12
    finally:
        await channel.close()
