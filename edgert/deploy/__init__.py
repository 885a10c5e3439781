"""Deployment tooling: profile models on an Android device (adb + ``benchmark_model``) or a Jetson
(ssh + ``trtexec``) and write a device profile (docs/design.md §6).

``edgert deploy android|jetson`` (see :mod:`edgert.cli._deploy`) is the command line; these are the
functions behind it. Every step can be printed instead of run (``dry_run=True``).
"""

from edgert.deploy.android import deploy_android
from edgert.deploy.jetson import deploy_jetson
from edgert.deploy.runner import DeployError, DeployResult, Runner

__all__ = ["DeployError", "DeployResult", "Runner", "deploy_android", "deploy_jetson"]
