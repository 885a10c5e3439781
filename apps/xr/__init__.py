"""XR perception pipelines (MediaPipe hands, face, pose, selfie segmentation) on edgert.

See :class:`apps.xr.pipelines.Pipelines`.
"""

from apps.xr.pipelines import FrameResult, Pipelines, check_frame, urgent_workers_for

__all__ = ["FrameResult", "Pipelines", "check_frame", "urgent_workers_for"]
