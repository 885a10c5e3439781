"""Cloud offload over MQTT or the Open Inference Protocol: clients, wire formats and workers, in one place.

::

    Runtime(offload="kserve://host:port")                  an Open Inference Protocol server (Triton, KServe, MLServer)
        └── make_kserve_worker ─ KServeWorker (_kserve_worker)   the cloud worker's burst semantics, another link
                                 ├── KServeDelegate / KServeSession / KServeLink (_kserve_client)
                                 └── gRPC (tritonclient) / REST (http.client) (_kserve_transport), URLs (_kserve_config)
    edgert cloud serve --kserve ─ MLServer + OnnxRuntimeModel (kserve_server, _kserve_runtime)
    Runtime(offload="auto" | "mqtt://host:port")
        └── make_cloud_worker (_factory) ─ CloudWorker (_worker)   the ``cloud`` processor of the runtime
                                 ├── CloudDelegate / CloudSession (_client)
                                 ├── MqttLink (_link)      one paho-mqtt connection, RTT and bandwidth
                                 └── EmbeddedCloud (_embedded)  ``"auto"``: amqtt broker + local worker
    edgert cloud serve ─ CloudServer (server)              asyncio worker answering requests
    both ends ─ _wire (EDG1 frames: JSON header + .npy blobs), _config (URLs, digests)
    TLS ─ _tls (client contexts; a failed handshake asked once more and named: certificate, client
          certificate, TLS mismatch), _broker_check (the same for an MQTT port, client and worker)

Importing this package imports no MQTT or protocol library; the modules that need paho-mqtt,
aiomqtt, amqtt, tritonclient or mlserver import them when used.
"""

from edgert.offload._config import DEFAULT_GROUP, DEFAULT_PREFIX, CloudConfig, digest_of, parse_broker_url
from edgert.offload._kserve_config import KServeConfig, parse_kserve_url

__all__ = ["DEFAULT_GROUP", "DEFAULT_PREFIX", "CloudConfig", "KServeConfig", "digest_of", "parse_broker_url",
           "parse_kserve_url"]
