"""XR perception pipelines (MediaPipe hands, face, pose, selfie segmentation) on edgert.

See :class:`apps.xr.pipelines.Pipelines`.
"""

from apps.xr.pipelines import FrameResult, Pipelines, check_frame

__all__ = ["FrameResult", "Pipelines", "check_frame"]
