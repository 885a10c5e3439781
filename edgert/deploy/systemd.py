"""The systemd unit ``edgert deploy jetson --service`` installs: an edgert command run from the venv."""

from __future__ import annotations

import shlex

from edgert.errors import ConfigError

#: Where the deploy tools put everything on the device, under the user's home.
REMOTE_DIR = "edgert"


def service_unit(command: str, home: str, user: str | None) -> str:
    """The systemd unit text that runs ``command`` (an ``edgert ...`` or python command) from the venv."""
    argv = shlex.split(command)
    if not argv:
        raise ConfigError("--service needs a command, e.g. --service 'edgert run xr-demo --seconds 0'")
    venv_bin = f"{home}/{REMOTE_DIR}/venv/bin"
    if "/" not in argv[0]:
        argv[0] = f"{venv_bin}/{argv[0]}"
    lines = [
        "[Unit]",
        "Description=edgert app (installed by edgert deploy jetson)",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        *( [f"User={user}"] if user else [] ),
        f"WorkingDirectory={home}/{REMOTE_DIR}",
        f"Environment=PATH={venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "Environment=PYTHONUNBUFFERED=1",
        f"ExecStart={shlex.join(argv)}",
        "Restart=on-failure",
        "RestartSec=2",
        # exit status 2 is a configuration error (a broker certificate that cannot be verified, refused
        # credentials, a bad option): restarting would fail the same way forever
        "RestartPreventExitStatus=2",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return "\n".join(lines)
