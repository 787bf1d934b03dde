"""A Ray job's status: one definition for rltui and for its on-cluster supervisor, which gets this
file beside itself (manifests_supervisor.CODE_FILES), so: Python 3.9, standard library only.

Ray's values (ray.job_submission.JobStatus, dashboard/modules/job/common.py at Ray 2.46.0):
PENDING, RUNNING, STOPPED, SUCCEEDED, FAILED; `is_terminal()` there is True for the last three,
FINAL here. rltui adds UNKNOWN, never Ray's: a job whose cluster went before its end was seen.
"""

from __future__ import annotations

from enum import Enum


class JobStatus(str, Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"  # rltui's: the cluster went before the job's end was seen

    def __str__(self) -> str:
        return self.value


# As plain strings: statuses arrive as JSON text, from Ray and from the supervisor's state.
FINAL: frozenset[str] = frozenset({JobStatus.SUCCEEDED.value, JobStatus.FAILED.value, JobStatus.STOPPED.value})
ACTIVE: frozenset[str] = frozenset({JobStatus.PENDING.value, JobStatus.RUNNING.value})
# Nothing more will be learnt of the job: it ended, or its cluster is gone.
SETTLED: frozenset[str] = FINAL | {JobStatus.UNKNOWN.value}
