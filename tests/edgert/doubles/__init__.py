"""Test doubles of the device tools ``edgert deploy`` drives: adb, ssh, scp and trtexec.

These are test doubles, not tools: each answers in the real tool's output format
(``adb get-state``/``getprop``/``push``, TensorFlow Lite ``benchmark_model``
timings, ``trtexec``'s performance summary, ``/etc/nv_tegra_release``) from a
JSON description of a fake device (``EDGERT_DOUBLE_CONFIG``), and logs every
call (``log`` in that JSON) so a test can assert what ran. :func:`install_doubles`
puts them on a PATH directory under their real names.
"""

from tests.edgert.doubles.install import install_doubles

__all__ = ["install_doubles"]
