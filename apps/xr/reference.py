"""MediaPipe 0.10.14's own legacy solutions, as the reference and the peer, in a process of their own.

mediapipe 0.10.14 needs protobuf < 5 and has wheels for Python 3.8 to 3.12 only, so it never shares an
environment with edgert (whose extras take protobuf 5 or later, on Python 3.11 to 3.13). The tests and
benchmarks that compare with it (nothing in the product imports this module) run it where it installs:

* :func:`python` makes, once, a venv with ``mediapipe==0.10.14`` under
  ``$EDGERT_CACHE/reference/`` (default ``~/.cache/edgert/reference/``), on this Python when mediapipe has
  wheels for it, else on a Python 3.10 to 3.12 found on ``PATH`` or in pyenv, or the one
  ``$EDGERT_REFERENCE_PYTHON`` names; it raises :class:`ReferenceUnavailable`, saying why, where none can
  be made (no such Python, no network for pip);
* :class:`Peer` starts this file in that venv as a server (one process, a thread per connection, as an
  app would run MediaPipe's solutions on its own threads) on a Unix socket;
* :class:`Solutions` is one set of MediaPipe solutions in that process: each ``process(frame)`` sends the
  frame (or the index of a frame the peer holds), MediaPipe's answer comes back as a :class:`Reference`.

Arrays cross the socket in NumPy's ``.npy`` format, so the two sides' NumPy versions need not match.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

MEDIAPIPE_VERSION = "0.10.14"
#: the Pythons mediapipe 0.10.14 has wheels for that this module runs on (it needs 3.10+ itself)
PYTHONS = ("3.12", "3.11", "3.10")
#: seconds to wait for the peer to start (import mediapipe) and for one answer
START_S = 120.0


class ReferenceUnavailable(RuntimeError):
    """MediaPipe's venv or process cannot be made here; the message says why and the fix."""


@dataclass(slots=True)
class Reference:
    """MediaPipe's answer on one frame, in the same units as :class:`apps.xr.FrameResult`."""

    hands: list[np.ndarray] = field(default_factory=list)        # float32[21, 3] per hand (x, y pixels)
    handedness: list[str] = field(default_factory=list)
    faces: list[np.ndarray] = field(default_factory=list)        # float32[478, 3]
    poses: list[np.ndarray] = field(default_factory=list)        # float32[33, 3]
    mask: np.ndarray | None = None                               # float32[H, W]


# --- the venv --------------------------------------------------------------------------------------


def _cache() -> Path:
    """``$EDGERT_CACHE``, else ``$XDG_CACHE_HOME/edgert``, else ``~/.cache/edgert`` (as ``edgert.models``)."""
    if os.environ.get("EDGERT_CACHE"):
        return Path(os.environ["EDGERT_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "edgert"


def _version_of(exe: str) -> str | None:
    """``"3.12"`` for a working interpreter, else None."""
    try:
        out = subprocess.run([exe, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def base_python() -> tuple[str, str]:
    """(interpreter, ``"3.x"``) to make the venv with: ``$EDGERT_REFERENCE_PYTHON``, else this Python when
    mediapipe has wheels for it, else the newest of :data:`PYTHONS` on ``PATH`` or in pyenv.

    Raises:
        ReferenceUnavailable: none found (the message lists where it looked).
    """
    named = os.environ.get("EDGERT_REFERENCE_PYTHON")
    if named:
        v = _version_of(named)
        if v not in PYTHONS:
            raise ReferenceUnavailable(f"EDGERT_REFERENCE_PYTHON={named} is {'not a Python' if v is None else v}: "
                                       f"mediapipe=={MEDIAPIPE_VERSION} needs Python {PYTHONS[-1]} to {PYTHONS[0]}")
        return named, v
    here = "%d.%d" % sys.version_info[:2]
    if here in PYTHONS:
        return sys.executable, here
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for v in PYTHONS:
        cands = [p for d in os.environ.get("PATH", "").split(os.pathsep) if d for p in [Path(d) / f"python{v}"]]
        cands += sorted(pyenv.glob(f"{v}.*/bin/python{v}"), reverse=True)
        for c in cands:
            if c.is_file() and os.access(c, os.X_OK) and _version_of(str(c)) == v:
                return str(c), v
    raise ReferenceUnavailable(f"mediapipe=={MEDIAPIPE_VERSION} has no wheel for Python {here} and no Python "
                               f"{', '.join(PYTHONS)} was found on PATH or under {pyenv}; set "
                               "EDGERT_REFERENCE_PYTHON to one")


def venv_dir(version: str) -> Path:
    """Where the venv for base Python ``version`` lives."""
    return _cache() / "reference" / f"mediapipe-{MEDIAPIPE_VERSION}-py{version}"


def python() -> Path:
    """The interpreter of the venv with ``mediapipe==0.10.14``, made on first use (pip, a few minutes).

    Raises:
        ReferenceUnavailable: no Python it installs on, or venv / pip failed (the message has pip's last lines).
    """
    import fcntl  # noqa: PLC0415 - POSIX only, as the Unix socket

    base, version = base_python()
    home = venv_dir(version)
    exe = home / "bin" / "python"
    done = home / ".complete"
    if done.is_file():
        return exe
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f".{home.name}.lock", "w") as lock:   # one maker at a time (parallel test runs)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.is_file():
            return exe
        steps = ([base, "-m", "venv", "--clear", str(home)],
                 [str(exe), "-m", "pip", "install", "-q", "--disable-pip-version-check", f"mediapipe=={MEDIAPIPE_VERSION}"],
                 [str(exe), "-c", "import mediapipe.python.solutions"])
        for cmd in steps:
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            except (OSError, subprocess.SubprocessError) as exc:
                raise ReferenceUnavailable(f"making MediaPipe's venv {home}: {' '.join(cmd[:4])}: {exc}") from exc
            if proc.returncode != 0:
                tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
                raise ReferenceUnavailable(f"making MediaPipe's venv {home}: `{' '.join(cmd[1:4])} …` exited "
                                           f"{proc.returncode}: {tail}")
        done.write_text(f"mediapipe=={MEDIAPIPE_VERSION}\n")
    return exe


# --- the wire: a JSON head, then each array as .npy ------------------------------------------------


def _send(conn: Any, head: dict[str, Any], arrays: Sequence[np.ndarray] = ()) -> None:
    conn.send_bytes(json.dumps({**head, "arrays": len(arrays)}).encode())
    for a in arrays:
        buf = io.BytesIO()
        np.save(buf, np.asarray(a), allow_pickle=False)
        conn.send_bytes(buf.getbuffer())


def _recv(conn: Any) -> tuple[dict[str, Any], list[np.ndarray]]:
    head = json.loads(conn.recv_bytes())
    return head, [np.load(io.BytesIO(conn.recv_bytes()), allow_pickle=False) for _ in range(head["arrays"])]


# --- the client side ---------------------------------------------------------------------------------


class Peer:
    """MediaPipe's process: this file run as a server in MediaPipe's venv, on a Unix socket.

    Args:
        frames: uint8 RGB frames the process holds, so that ``Solutions.process(i)`` sends an index, not
            the frame (as the benchmarks' peer, which had its frames in memory, ran).

    Raises:
        ReferenceUnavailable: the venv cannot be made, or the process did not start (its log's tail).
    """

    def __init__(self, frames: Sequence[np.ndarray] | None = None) -> None:
        exe = python()
        self._dir = tempfile.TemporaryDirectory(prefix="edgert-mediapipe-")
        self.address = str(Path(self._dir.name) / "peer.sock")
        self.log = Path(self._dir.name) / "peer.log"
        cmd = [str(exe), str(Path(__file__).resolve()), "serve", self.address]
        if frames is not None:
            np.save(Path(self._dir.name) / "frames.npy", np.stack([np.asarray(f) for f in frames]), allow_pickle=False)
            cmd.append(str(Path(self._dir.name) / "frames.npy"))
        with open(self.log, "wb") as log:   # MediaPipe's own log lines go here, not on the caller's stderr
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        ready: list[bytes] = []
        reader = threading.Thread(target=lambda: ready.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(START_S)
        if not ready or ready[0].strip() != b"ready":
            self.close()
            raise ReferenceUnavailable(f"MediaPipe's process ({exe}) did not start: {self._log_tail()}")

    @property
    def pid(self) -> int:
        """The process's id (for its memory)."""
        return self.proc.pid

    def cpu_s(self) -> float:
        """CPU seconds the process has used so far, all its threads, user + system (Linux ``/proc``)."""
        f = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

    def _log_tail(self) -> str:
        try:
            return " | ".join(self.log.read_text(errors="replace").strip().splitlines()[-3:]) or "no output"
        except OSError:
            return "no log"

    def solutions(self, **options: Any) -> Solutions:
        """A :class:`Solutions` in this process (keyword arguments as :class:`Solutions`)."""
        return Solutions(peer=self, **options)

    def close(self) -> None:
        """Stop the process (closing its stdin ends it) and remove its socket."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._dir.cleanup()

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Solutions:
    """MediaPipe's face_mesh (with iris), hands (full), pose (full) and selfie segmentation, in MediaPipe's process.

    Args:
        static: static-image mode (every detector every frame) vs video mode (tracking).
        max_hands / max_faces / pose / segmentation: which solutions, as for ``Pipelines``.
        refine_faces: face mesh with the attention model (478 points) or the plain one (468).
        peer: the :class:`Peer` to run in; None starts one of its own (closed by :meth:`close`).

    Raises:
        ReferenceUnavailable: MediaPipe's venv or process cannot be made (the message says why).
    """

    def __init__(self, static: bool = True, max_hands: int = 2, max_faces: int = 1, pose: bool = True,
                 segmentation: bool = True, refine_faces: bool = True, peer: Peer | None = None) -> None:
        from multiprocessing.connection import Client  # noqa: PLC0415

        self._own = peer is None
        self.peer = Peer() if peer is None else peer
        self._conn = Client(self.peer.address, family="AF_UNIX")
        _send(self._conn, {"static": static, "max_hands": max_hands, "max_faces": max_faces, "pose": pose,
                           "segmentation": segmentation, "refine_faces": refine_faces})
        head, _ = _recv(self._conn)
        if "error" in head:
            self.close()
            raise ReferenceUnavailable(f"MediaPipe's solutions did not start: {head['error']}")

    def process(self, frame: np.ndarray | int) -> Reference:
        """Every enabled solution on an RGB uint8 frame, or on frame ``frame`` of the peer's ``frames``."""
        if isinstance(frame, (int, np.integer)):
            _send(self._conn, {"index": int(frame)})
        else:
            _send(self._conn, {}, [frame])
        head, arrays = _recv(self._conn)
        if "error" in head:
            raise RuntimeError(f"MediaPipe raised: {head['error']}")
        it = iter(arrays)
        return Reference(hands=[next(it) for _ in range(head["hands"])], handedness=head["handedness"],
                         faces=[next(it) for _ in range(head["faces"])], poses=[next(it) for _ in range(head["poses"])],
                         mask=next(it) if head["mask"] else None)

    def close(self) -> None:
        """Release MediaPipe's graphs (and the peer, when it is this object's own)."""
        self._conn.close()
        if self._own:
            self.peer.close()


def match_error(ours: list[np.ndarray], theirs: list[np.ndarray], diagonal: float) -> list[float]:
    """Per reference instance, the mean x-y landmark distance to our nearest instance / ``diagonal``.

    Instances pair greedily by the smallest mean distance; an unmatched one scores inf.
    """
    errs = []
    left = list(range(len(ours)))
    for t in theirs:
        best, k = float("inf"), -1
        for i in left:
            n = min(len(ours[i]), len(t))
            d = float(np.linalg.norm(ours[i][:n, :2] - t[:n, :2], axis=1).mean()) / diagonal
            if d < best:
                best, k = d, i
        if k >= 0:
            left.remove(k)
        errs.append(best)
    return errs


# --- the server side (runs in MediaPipe's venv: numpy, mediapipe and the standard library only) -------


def _pixels(lms: Any, h: int, w: int) -> np.ndarray:
    return np.array([[p.x * w, p.y * h, p.z * w] for p in lms.landmark], dtype=np.float32)


class _Local:
    """MediaPipe's solutions in this process (the server's side of :class:`Solutions`)."""

    def __init__(self, static: bool, max_hands: int, max_faces: int, pose: bool, segmentation: bool,
                 refine_faces: bool) -> None:
        import mediapipe as mp  # noqa: PLC0415 - only in MediaPipe's venv

        s = mp.solutions
        self.hands = s.hands.Hands(static_image_mode=static, max_num_hands=max_hands,
                                   model_complexity=1) if max_hands else None
        self.face = s.face_mesh.FaceMesh(static_image_mode=static, max_num_faces=max_faces,
                                         refine_landmarks=refine_faces) if max_faces else None
        self.pose = s.pose.Pose(static_image_mode=static, model_complexity=1) if pose else None
        self.seg = s.selfie_segmentation.SelfieSegmentation(model_selection=0) if segmentation else None

    def process(self, frame: np.ndarray) -> Reference:
        h, w = frame.shape[:2]
        ref = Reference()
        if self.hands is not None:
            r = self.hands.process(frame)
            ref.hands = [_pixels(x, h, w) for x in (r.multi_hand_landmarks or [])]
            ref.handedness = [c.classification[0].label for c in (r.multi_handedness or [])]
        if self.face is not None:
            r = self.face.process(frame)
            ref.faces = [_pixels(x, h, w) for x in (r.multi_face_landmarks or [])]
        if self.pose is not None:
            r = self.pose.process(frame)
            ref.poses = [_pixels(r.pose_landmarks, h, w)] if r.pose_landmarks is not None else []
        if self.seg is not None:
            ref.mask = np.asarray(self.seg.process(frame).segmentation_mask, dtype=np.float32)
        return ref

    def close(self) -> None:
        for s in (self.hands, self.face, self.pose, self.seg):
            if s is not None:
                s.close()


def _connection(conn: Any, frames: np.ndarray | None) -> None:
    """One client's solutions: made from its first message, then one answer per frame until it hangs up."""
    try:
        head, _ = _recv(conn)
        head.pop("arrays")
        try:
            local = _Local(**head)
        except Exception as exc:  # noqa: BLE001 - reported to the client, which raises it
            _send(conn, {"error": f"{type(exc).__name__}: {exc}"})
            return
        _send(conn, {})
        try:
            while True:
                head, arrays = _recv(conn)
                try:
                    frame = frames[head["index"]] if "index" in head else arrays[0]  # type: ignore[index]
                    r = local.process(np.ascontiguousarray(frame))
                except Exception as exc:  # noqa: BLE001 - reported to the client, which raises it
                    _send(conn, {"error": f"{type(exc).__name__}: {exc}"})
                    continue
                _send(conn, {"hands": len(r.hands), "faces": len(r.faces), "poses": len(r.poses),
                             "mask": r.mask is not None, "handedness": r.handedness},
                      [*r.hands, *r.faces, *r.poses, *([r.mask] if r.mask is not None else [])])
        finally:
            local.close()
    except (EOFError, OSError):
        pass   # the client hung up
    finally:
        conn.close()


def _serve(address: str, frames_path: str | None) -> None:
    """Accept clients on ``address`` (a thread each) until stdin closes (the parent closed it or died)."""
    from multiprocessing.connection import Listener  # noqa: PLC0415

    frames = np.load(frames_path, allow_pickle=False) if frames_path else None
    import mediapipe  # noqa: F401, PLC0415 - imported before "ready", so that the first client does not wait

    listener = Listener(address, family="AF_UNIX")

    def accept() -> None:
        while True:
            try:
                conn = listener.accept()
            except OSError:
                return
            threading.Thread(target=_connection, args=(conn, frames), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()
    os._exit(0)   # the clients' threads are daemons in MediaPipe's calls: no clean join


if __name__ == "__main__" and len(sys.argv) >= 3 and sys.argv[1] == "serve":
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]   # apps/xr's own modules
    _serve(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
