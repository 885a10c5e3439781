"""Cloud offload over MQTT: the client, its wire format and the worker, in one place.

::

    Runtime(offload="auto" | "mqtt://host:port")
        └── make_cloud_worker ─ CloudWorker (_worker)      the ``cloud`` processor of the runtime
                                 ├── CloudDelegate / CloudSession (_client)
                                 ├── MqttLink (_link)      one paho-mqtt connection, RTT and bandwidth
                                 └── EmbeddedCloud (_embedded)  ``"auto"``: amqtt broker + local worker
    edgert cloud serve ─ CloudServer (server)              asyncio worker answering requests
    both ends ─ _wire (EDG1 frames: JSON header + .npy blobs), _config (URLs, digests)

Importing this package imports no MQTT library; the modules that need paho-mqtt,
aiomqtt or amqtt import them when used.
"""

from edgert.offload._config import DEFAULT_GROUP, DEFAULT_PREFIX, CloudConfig, digest_of, parse_broker_url

__all__ = ["DEFAULT_GROUP", "DEFAULT_PREFIX", "CloudConfig", "digest_of", "parse_broker_url"]
