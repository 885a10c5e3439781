"""A test double of the energy meter: :class:`CloudMeter` also accounts cloud invocations by hand."""

from __future__ import annotations

from scheduler.energy import EnergyMeter


class CloudMeter(EnergyMeter):
    """An :class:`EnergyMeter` that a test feeds cloud invocations too (the simulator accounts them itself)."""

    def record_cloud(self, model: str) -> float:
        """Account one cloud invocation's radio energy; returns its mJ (0.0 when the radio is not modelled)."""
        mj = self.model.cloud_mj(model)
        self._radio_mj += mj
        self._add(model, mj)
        return mj
