"""``edgert cloud serve``: start a cloud worker (see :mod:`edgert.offload.server`).

Wired into ``edgert/cli/`` with ``register(sub)``. Errors print one line on
stderr and exit with status 2. Also runnable as ``python -m edgert.cli cloud serve …``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from edgert.errors import EdgeRTError


def register(subparsers: Any) -> None:
    """Add ``cloud serve`` to the main parser's subparsers."""
    p = subparsers.add_parser("cloud", help="cloud offload: serve models to edgert runtimes over MQTT",
                              description="Cloud offload over MQTT (docs/design.md §5).")
    p.set_defaults(func=_missing_action, _cloud_parser=p)
    actions = p.add_subparsers(dest="action", metavar="{serve}")
    s = actions.add_parser(
        "serve", help="answer model requests from an MQTT broker",
        description="Serve the .onnx / .tflite models of DIR (and only those) to edgert runtimes. Workers "
                    "share one MQTT shared subscription, so starting another adds capacity. SIGTERM/SIGINT "
                    "drain in-flight requests before exiting.")
    s.add_argument("--broker", metavar="mqtt://HOST:PORT",
                   help="broker URL: mqtt:// or mqtts:// (TLS), optional user[:password]@ and ?ca=&cert=&key=")
    s.add_argument("--kserve", metavar="HOST:PORT",
                   help="instead of MQTT: serve the .onnx files of DIR over the Open Inference Protocol (KServe v2), "
                        "gRPC on HOST:PORT (MLServer with edgert's ONNX Runtime model runtime; clients use "
                        "offload=kserve://HOST:PORT)")
    s.add_argument("--http-port", type=int, default=None,
                   help="with --kserve: the REST port (default PORT-1, as Triton's 8000/8001)")
    s.add_argument("--models", required=True, metavar="DIR", help="directory of .onnx / .tflite files to serve")
    s.add_argument("--username", help="broker username (overrides the URL's)")
    s.add_argument("--password-env", metavar="VAR", default="EDGERT_MQTT_PASSWORD",
                   help="environment variable holding the broker password (default EDGERT_MQTT_PASSWORD)")
    s.add_argument("--tls", action="store_true", help="use TLS even with an mqtt:// URL")
    s.add_argument("--cafile", help="CA certificate (PEM) that signed the broker's certificate")
    s.add_argument("--certfile", help="client certificate (PEM) for mutual TLS")
    s.add_argument("--keyfile", help="client private key (PEM) for mutual TLS")
    s.add_argument("--tls-insecure", action="store_true", help="skip broker certificate verification (testing only)")
    s.add_argument("--group", default="edgert",
                   help="shared-subscription group (default edgert); '' subscribes plainly (brokers without $share)")
    s.add_argument("--prefix", default="edgert", help="topic prefix (default edgert)")
    s.add_argument("--slots", type=int, default=1, help="requests computed at once (default 1, one core)")
    s.add_argument("--max-payload", type=int, default=None, metavar="BYTES",
                   help="largest request accepted (default 16 MiB)")
    s.add_argument("--drain-s", type=float, default=10.0, help="graceful-stop wait for in-flight requests (s)")
    s.add_argument("--id", dest="worker_id", help="MQTT client id (default: unique per process)")
    s.add_argument("-v", "--verbose", action="store_true", help="also log every refused request")
    s.set_defaults(func=run)


def _missing_action(args: argparse.Namespace) -> int:
    args._cloud_parser.print_usage(sys.stderr)
    print("edgert cloud: choose an action: serve", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """Run the worker until SIGTERM/SIGINT; 0 after a graceful drain, 2 on a configuration error."""
    import os  # noqa: PLC0415

    from edgert.extras import require  # noqa: PLC0415
    from edgert.offload import parse_broker_url  # noqa: PLC0415
    from edgert.offload.server import serve_forever  # noqa: PLC0415

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s edgert-cloud %(levelname)s %(message)s")
    logging.getLogger("edgert.cloud").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    if (args.broker is None) == (args.kserve is None):
        print("edgert cloud serve: give --broker mqtt://HOST:PORT (MQTT workers) or --kserve HOST:PORT "
              "(an Open Inference Protocol server), one of them", file=sys.stderr)
        return 2
    if args.kserve is not None:
        return _serve_kserve(args)
    try:
        require("aiomqtt", "edgert cloud serve")
        cfg = parse_broker_url(args.broker)
        over: dict[str, Any] = {"prefix": args.prefix}
        if args.username:
            over["username"] = args.username
        if os.environ.get(args.password_env):
            over["password"] = os.environ[args.password_env]
        if args.tls or args.cafile or args.certfile:
            over["tls"] = True
        for k, v in (("ca", args.cafile), ("cert", args.certfile), ("key", args.keyfile)):
            if v:
                over[k] = v
        if args.tls_insecure:
            over["insecure"] = True
        if args.max_payload is not None:
            over["max_payload"] = args.max_payload
        if args.slots < 1:
            raise EdgeRTError(f"--slots must be >= 1, got {args.slots}")
        stats = serve_forever(replace(cfg, **over), args.models, group=args.group, slots=args.slots,
                              worker_id=args.worker_id, drain_s=args.drain_s)
    except EdgeRTError as exc:
        print(f"edgert cloud serve: {exc}", file=sys.stderr)
        return 2
    print(f"edgert cloud serve: stopped; served {stats.served}, refused {stats.errors}, garbage {stats.garbage}",
          file=sys.stderr)
    return 0


def _serve_kserve(args: argparse.Namespace) -> int:
    """``--kserve HOST:PORT``: MLServer with edgert's ONNX runtime until SIGTERM/SIGINT."""
    from edgert.offload.kserve_server import serve_forever  # noqa: PLC0415

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s edgert-cloud %(levelname)s %(message)s")
    logging.getLogger("edgert.cloud").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    host, sep, port = args.kserve.rpartition(":")
    try:
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise EdgeRTError(f"--kserve {args.kserve!r} must be HOST:PORT (the gRPC port), e.g. 127.0.0.1:8001")
        http_port = args.http_port if args.http_port is not None else int(port) - 1
        serve_forever(args.models, host or "127.0.0.1", int(port), http_port)
    except EdgeRTError as exc:
        print(f"edgert cloud serve: {exc}", file=sys.stderr)
        return 2
    print("edgert cloud serve: stopped", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry: ``main(["serve", ...])`` (the same flags as ``edgert cloud serve``)."""
    parser = argparse.ArgumentParser(prog="edgert")
    sub = parser.add_subparsers(dest="command")
    register(sub)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["cloud"]:
        argv = argv[1:]
    if argv[:1] != ["serve"] and argv[:1] not in (["-h"], ["--help"]):
        argv = ["serve", *argv]
    argv = ["cloud", *argv]
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
