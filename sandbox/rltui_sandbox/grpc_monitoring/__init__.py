"""The sandbox's Cloud Monitoring: google.monitoring.v3.MetricService over the Lustre meter.

The real `monitoring_v3.MetricServiceClient` reads Managed Lustre's metrics from here, computed
from the bytes actually written to and read from each instance's local folder. Only the read
side is served; every other MetricService method answers UNIMPLEMENTED.

One module per job, each saying what it imitates and from where:
- metrics.py: the Lustre metric descriptors and the series each reads off a meter sample;
- filters.py: the Monitoring filter subset, and the INVALID_ARGUMENT error of a refused request;
- aggregation.py: raw points, per-series aligners, cross-series reducers, group_by fields;
- service.py: the MetricService read methods, their request checks and paging, on a gRPC server.

Everything public is importable from here, as from the single module this package was.
"""

from rltui_sandbox.grpc_monitoring.aggregation import Raw
from rltui_sandbox.grpc_monitoring.metrics import (
    AVAILABLE_BYTES,
    CAPACITY_BYTES,
    CONNECTED_CLIENTS,
    FREE_BYTES,
    INODES_FREE,
    INODES_MAXIMUM,
    IO_TIME,
    METADATA_OPERATIONS,
    PREFIX,
    READ_BYTES,
    READ_SAMPLES,
    RESOURCE_TYPE,
    SAMPLE_PERIOD_S,
    VISIBILITY_DELAY_S,
    WRITE_BYTES,
    WRITE_SAMPLES,
    Labels,
)
from rltui_sandbox.grpc_monitoring.service import (
    DEFAULT_PAGE_SIZE,
    MIN_ALIGNMENT_S,
    SERVICE,
    ProjectInstances,
    add_monitoring_service,
)

__all__ = [
    "AVAILABLE_BYTES", "CAPACITY_BYTES", "CONNECTED_CLIENTS", "DEFAULT_PAGE_SIZE", "FREE_BYTES", "INODES_FREE",
    "INODES_MAXIMUM", "IO_TIME", "Labels", "METADATA_OPERATIONS", "MIN_ALIGNMENT_S", "PREFIX", "ProjectInstances",
    "READ_BYTES", "READ_SAMPLES", "RESOURCE_TYPE", "Raw", "SAMPLE_PERIOD_S", "SERVICE", "VISIBILITY_DELAY_S",
    "WRITE_BYTES", "WRITE_SAMPLES", "add_monitoring_service",
]
