"""Object-store servers and a latency/fault proxy on 127.0.0.1, shared by tests and benchmarks.

Neither the tests nor the benchmarks own these: both start real store servers (moto, Azurite,
fake-gcs-server, SeaweedFS) on loopback and put the proxy in front of them, so the module lives
beside both packages instead of inside one.

- `loopback.servers`: ``serve_s3``, ``serve_azure``, ``serve_gcs`` (and the benchmarks'
  ``serve_s3_process`` and ``serve_seaweedfs``), each yielding a `StoreServer`;
- `loopback.proxy`: `StoreProxy`, which delays, counts, refuses or resets requests;
- `loopback.spark_cluster`: a standalone Spark master, workers and a Connect server;
- `loopback.reference_service`: what the tests' and the benchmarks' Delta Spark servers share
  (the JSON-lines loop, the artifact name).
"""
