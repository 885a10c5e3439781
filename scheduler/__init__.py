"""Pure scheduling policies and the trace-replay simulator.

Imports only the standard library and numpy. Policies never read the clock:
see :mod:`scheduler.types` for the snapshot they decide over.
"""

from scheduler.errors import ConfigError, EdgeRTError, TraceError
from scheduler.estimator import LatencyEstimator
from scheduler.profile import CloudSpec, DeviceProfile, ProcessorSpec
from scheduler.registry import DEFAULT_POLICY, make_policy, policy_names
from scheduler.types import (
    PROCESSOR_KINDS,
    Assignment,
    LatencyModel,
    Policy,
    ProcessorView,
    RequestView,
    SchedulerView,
)

__all__ = [
    "PROCESSOR_KINDS", "Assignment", "CloudSpec", "ConfigError", "DEFAULT_POLICY", "DeviceProfile",
    "EdgeRTError", "LatencyEstimator", "LatencyModel", "Policy", "ProcessorSpec", "ProcessorView",
    "RequestView", "SchedulerView", "TraceError", "make_policy", "policy_names",
]
