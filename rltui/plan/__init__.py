"""The codelab's steps as a graph that runs itself: Step contract, Runner, progress file.

Imports no cloud or UI library: the TUI and the headless CLI both drive it.
"""

from rltui.plan.progress import ProgressStore, RunRecord, StepProgress, progress_path
from rltui.plan.runner import RetryPolicy, RunEvent, Runner, RunResult, StepView
from rltui.plan.step import Kept, PermanentError, Probe, Step, StepOutput, StepState, TransientError

__all__ = [
    "Kept", "PermanentError", "Probe", "ProgressStore", "RetryPolicy", "RunEvent", "RunRecord",
    "RunResult", "Runner", "Step", "StepOutput", "StepProgress", "StepState", "StepView",
    "TransientError", "progress_path",
]
