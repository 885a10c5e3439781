"""An emulated arm64 Linux board for tests: a Debian 12 minbase arm64 root under qemu-user, reached over real ssh.

The board is what ``edgert deploy linux`` is tested against: Debian's own ``debootstrap``
builds an arm64 root with ``python3``, ``python3-venv``, ``python3-pip`` and ``openssh-server`` (no rsync,
no device tree); ``qemu-user-static``'s binfmt_misc entry runs its binaries as a Cortex-A76 (``QEMU_CPU``);
its own ``sshd`` listens on
``127.0.0.1:<free port>`` and takes a throwaway ed25519 key named in an ssh config of the board's own
(``ssh -F``), so the user's ``~/.ssh/config`` is never touched.

The root is cached between runs in ``$EDGERT_BOARD_CACHE`` (default ``~/.cache/edgert/board-arm64``):
the first :func:`ensure_root` takes minutes (debootstrap under emulation), later ones nothing.
:meth:`Board.stop` stops sshd and every process whose root is the board's, then unmounts ``proc``,
``sys`` and ``dev``; :func:`purge` deletes the cache only after checking that nothing is mounted in it.

Needs root on the host (debootstrap, chroot, mount). :func:`unavailable` says why the board cannot be
had here (None when it can), for a test's skip. Command line::

    python -m edgert.testing.board up      # build or reuse the root, start sshd, print the ssh config
    python -m edgert.testing.board purge   # unmount and delete the cached root
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

#: The packages of the board beyond minbase.
PACKAGES = ("python3", "python3-venv", "python3-pip", "openssh-server")
SUITE = "bookworm"
QEMU = Path("/usr/bin/qemu-aarch64-static")
BINFMT_CONF = Path("/usr/lib/binfmt.d/qemu-aarch64.conf")
BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")
#: The file debootstrap's finished root carries, so a half-built one is never taken for the board.
READY = ".edgert-board-ready"
#: Mounted into the root while the board is up, in mount order (unmounted in reverse). /sys gives the
#: CPU detection of XNNPACK and ONNX Runtime the possible / present CPU lists they read beside /proc/cpuinfo.
MOUNTS = (("proc", ("-t", "proc", "proc")), ("sys", ("--bind", "/sys")), ("dev", ("--bind", "/dev")),
          ("dev/pts", ("--bind", "/dev/pts")))
#: qemu-user below this shows arm64 code the host's x86 /proc/cpuinfo: ONNX Runtime (1.31, 1.32) and
#: LiteRT (2.3) die with SIGSEGV in their CPU detection there (measured with 7.2). 10.0 emulates the file
#: (measured); the emulation was posted to qemu-devel in August 2023, after 8.1's freeze, hence 8.2.
MIN_QEMU = (8, 2)
FALLBACK_MIRROR = "http://deb.debian.org/debian"
#: The CPU qemu emulates for the board's processes: a Cortex-A76 (Raspberry Pi 5's core; ARMv8.2 with NEON
#: and dot product). qemu's default ``max`` CPU offers SVE/SME, and XNNPACK's kernels for them run about 8x
#: slower under emulation (hand_landmark_lite: 50-68 s a call against 7 s, on a loaded 2-core host).
BOARD_CPU = "cortex-a76"


class BoardError(RuntimeError):
    """The board could not be built or started; the message says which step and why."""


def cache_dir() -> Path:
    """Where the board's root, key and ssh config live between runs."""
    return Path(os.environ.get("EDGERT_BOARD_CACHE", "~/.cache/edgert/board-arm64")).expanduser()


def unavailable() -> str | None:
    """Why an emulated arm64 board cannot be had on this host, or None when it can."""
    if sys.platform != "linux":
        return f"needs Linux (binfmt_misc); this is {sys.platform}"
    if os.geteuid() != 0:
        return "needs root on the host (debootstrap, chroot and mount)"
    missing = [p for p in ("debootstrap", "ssh", "ssh-keygen", "scp") if shutil.which(p) is None]
    if not QEMU.is_file() or not BINFMT_CONF.is_file():
        missing.append("qemu-user-static")
    if missing:
        return f"missing {', '.join(missing)}: apt-get install qemu-user-static debootstrap openssh-client"
    version = qemu_version()
    if version < MIN_QEMU:
        return (f"qemu-user {'.'.join(map(str, version))} shows arm64 code the host's x86 /proc/cpuinfo, and ONNX "
                "Runtime and LiteRT crash on it; install qemu-user-static 8.2 or newer (Debian 12: "
                "apt-get install -t bookworm-backports qemu-user-static)")
    try:
        register_binfmt()
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"binfmt_misc cannot be had here ({exc}); a container needs --privileged for it"
    return None


def qemu_version() -> tuple[int, ...]:
    """The version of qemu-aarch64-static, e.g. (10, 0, 2); (0,) when it does not say."""
    try:
        out = subprocess.run([str(QEMU), "--version"], check=False, capture_output=True, text=True).stdout
    except OSError:
        return (0,)
    m = re.search(r"version (\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(g) for g in m.groups() if g is not None) if m else (0,)


def register_binfmt() -> None:
    """Register qemu-aarch64 with binfmt_misc (by hand: the host may have no update-binfmts).

    Mounts binfmt_misc first when its ``register`` file is missing. An entry already there is replaced:
    its ``F`` flag holds the qemu binary open that was installed when it was registered, maybe an older
    one. The entry stays registered for the host (other arm64 roots share it); it runs only arm64 ELF files.
    """
    if (BINFMT_DIR / "qemu-aarch64").is_file():
        (BINFMT_DIR / "qemu-aarch64").write_text("-1")
    if not (BINFMT_DIR / "register").exists():
        subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT_DIR)], check=True,
                       capture_output=True)
    (BINFMT_DIR / "register").write_text(BINFMT_CONF.read_text().strip() + "\n")


def debian_mirror() -> str:
    """The Debian mirror this host's apt uses (``URIs:`` of debian.sources, or sources.list)."""
    deb822 = Path("/etc/apt/sources.list.d/debian.sources")
    if deb822.is_file():
        for line in deb822.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split(":", 1)[1].split()[0]
    legacy = Path("/etc/apt/sources.list")
    if legacy.is_file():
        for line in legacy.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and "security" not in parts[1]:
                return parts[-3] if parts[1].startswith("[") else parts[1]
    return FALLBACK_MIRROR


def mounts_under(path: Path) -> list[Path]:
    """Mount points at or below ``path``, deepest first (the order to unmount them)."""
    top = str(path.resolve())
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        point = line.split()[1].replace("\\040", " ")
        if point == top or point.startswith(top + "/"):
            found.append(Path(point))
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def unmount_all(path: Path) -> None:
    """Unmount everything mounted at or below ``path``; raises BoardError when something stays mounted."""
    for point in mounts_under(path):
        subprocess.run(["umount", str(point)], check=False, capture_output=True)
    for point in mounts_under(path):  # a busy one: detach it from the tree (its users see it until they end)
        subprocess.run(["umount", "-l", str(point)], check=False, capture_output=True)
    left = mounts_under(path)
    if left:
        raise BoardError(f"still mounted under {path}: {', '.join(map(str, left))}")


def safe_rmtree(path: Path) -> None:
    """Delete ``path`` after unmounting what is under it (a bound /dev under ``rm -rf`` deletes the host's)."""
    if not path.exists():
        return
    unmount_all(path)
    shutil.rmtree(path)


def ensure_root(cache: Path | None = None, log: bool = True) -> Path:
    """The cached board root, built with debootstrap when absent; its path.

    Raises:
        BoardError: debootstrap failed (its last lines are in the message).
    """
    cache = cache or cache_dir()
    root = cache / "root"
    if (root / READY).is_file():
        return root
    cache.mkdir(parents=True, exist_ok=True)
    partial = cache / "root.partial"
    safe_rmtree(partial)
    safe_rmtree(root)
    mirror = debian_mirror()
    if log:
        print(f"building the arm64 board root in {root} from {mirror} (minutes, once)", file=sys.stderr)
    argv = ["debootstrap", "--arch=arm64", "--variant=minbase", f"--include={','.join(PACKAGES)}",
            SUITE, str(partial), mirror]
    proc = subprocess.run(argv, check=False, capture_output=True, text=True, errors="replace")
    unmount_all(partial)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise BoardError(f"debootstrap exited {proc.returncode}:\n{tail}")
    for src in ("/etc/resolv.conf", "/etc/ssl/certs/ca-certificates.crt"):
        if Path(src).is_file():
            (partial / src.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, partial / src.lstrip("/"))
    subprocess.run(["chroot", str(partial), "ssh-keygen", "-A"], check=True, capture_output=True)
    (partial / READY).write_text(" ".join(argv) + "\n")
    partial.rename(root)
    return root


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Board:
    """A started board: ``ssh -F ssh_config host`` logs in as root (``host`` is ``root@127.0.0.1:PORT``)."""

    root: Path
    port: int
    key: Path
    ssh_config: Path
    sshd: subprocess.Popen[bytes] | None = None
    mounted: list[Path] = field(default_factory=list)

    @property
    def host(self) -> str:
        """The ``user@host:port`` that ``edgert deploy linux --host`` takes."""
        return f"root@127.0.0.1:{self.port}"

    def ssh(self, command: str, timeout_s: float = 600.0) -> subprocess.CompletedProcess[str]:
        """Run ``command`` on the board over real ssh (BatchMode, the board's key)."""
        return subprocess.run(["ssh", "-F", str(self.ssh_config), "-o", "BatchMode=yes", "-p", str(self.port),
                               "root@127.0.0.1", command], check=False, capture_output=True, text=True,
                              timeout=timeout_s)

    def processes(self) -> list[int]:
        """Ids of the host's processes whose root directory is the board's (all started by the board)."""
        mine = []
        top = str(self.root.resolve())
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.readlink(entry / "root") == top:
                        mine.append(int(entry.name))
                except OSError:
                    continue
        return mine

    def stop(self) -> None:
        """Stop sshd and every process in the board's root, then unmount what :func:`start` mounted."""
        if self.sshd is not None and self.sshd.poll() is None:
            self.sshd.terminate()
            try:
                self.sshd.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.sshd.kill()
                self.sshd.wait(timeout=10)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = self.processes()
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    continue
            deadline = time.monotonic() + 5
            while pids and self.processes() and time.monotonic() < deadline:
                time.sleep(0.1)
        unmount_all(self.root)
        self.mounted.clear()


def _key(cache: Path) -> Path:
    key = cache / "id_ed25519"
    if not key.is_file():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "edgert-test-board", "-f", str(key)],
                       check=True, capture_output=True)
    return key


def _ssh_config(cache: Path, key: Path, port: int) -> Path:
    cfg = cache / "ssh_config"
    body = (f"IdentityFile {key}\nIdentitiesOnly yes\nStrictHostKeyChecking no\n"
            f"UserKnownHostsFile /dev/null\nLogLevel ERROR\n")
    cfg.write_text(f"# the emulated arm64 test board (edgert.testing.board)\nHost edgert-board\n"
                   f"HostName 127.0.0.1\nPort {port}\nUser root\n{body}\nHost 127.0.0.1\n{body}")
    return cfg


def start(cache: Path | None = None, wait_s: float = 60.0) -> Board:
    """Build or reuse the root, mount proc/sys/dev, and start its sshd on a free loopback port.

    Raises:
        BoardError: a step failed (the board is stopped and unmounted again first).
    """
    cache = cache or cache_dir()
    register_binfmt()
    root = ensure_root(cache)
    key = _key(cache)
    ssh_dir = root / "root" / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(Path(f"{key}.pub").read_text())
    (ssh_dir / "authorized_keys").chmod(0o600)
    (root / "run" / "sshd").mkdir(parents=True, exist_ok=True)
    port = free_port()
    board = Board(root, port, key, _ssh_config(cache, key, port))
    try:
        for sub, how in MOUNTS:
            subprocess.run(["mount", *how, str(root / sub)], check=True, capture_output=True)
            board.mounted.append(root / sub)
        board.sshd = subprocess.Popen(
            ["chroot", str(root), "/usr/sbin/sshd", "-D", "-e", "-p", str(port), "-o", "ListenAddress=127.0.0.1",
             "-o", "PermitRootLogin=prohibit-password", "-o", "PasswordAuthentication=no",
             "-o", f"SetEnv=QEMU_CPU={BOARD_CPU}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={**os.environ, "QEMU_CPU": BOARD_CPU})
        _wait_login(board, wait_s)
    except BaseException:
        board.stop()
        raise
    return board


def _wait_login(board: Board, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    last = ""
    while time.monotonic() < deadline:
        if board.sshd is not None and board.sshd.poll() is not None:
            err = board.sshd.stderr.read().decode(errors="replace") if board.sshd.stderr else ""
            raise BoardError(f"the board's sshd exited {board.sshd.returncode}: {err.strip()[-300:]}")
        res = board.ssh("uname -m", timeout_s=30)
        if res.returncode == 0 and res.stdout.strip() == "aarch64":
            return
        last = (res.stdout + res.stderr).strip()[-200:]
        time.sleep(0.5)
    raise BoardError(f"no ssh login on 127.0.0.1:{board.port} within {wait_s:.0f} s ({last})")


def purge(cache: Path | None = None) -> None:
    """Delete the cached board (root, key, config), unmounting anything left mounted in it first."""
    safe_rmtree(cache or cache_dir())


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """``up`` (start, print the ssh config, wait for Ctrl-C, stop) or ``purge``."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["purge"]:
        purge()
        return 0
    if args[:1] != ["up"]:
        print("usage: python -m edgert.testing.board up|purge", file=sys.stderr)
        return 2
    why = unavailable()
    if why:
        print(f"no board: {why}", file=sys.stderr)
        return 2
    board = start()
    print(f"board up: ssh -F {board.ssh_config} edgert-board   (host {board.host}); Ctrl-C stops it", flush=True)
    for sig in (signal.SIGINT, signal.SIGTERM):   # a shell's background job ignores SIGINT: take both
        signal.signal(sig, _interrupt)
    try:
        while board.sshd is not None and board.sshd.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        board.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
