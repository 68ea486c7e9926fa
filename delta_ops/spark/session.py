"""A SparkSession with defaults that suit delta-ops' writer and a small machine.

`get_spark` builds (or reuses) the process's SparkSession. Besides sizing it for a laptop
or a CI box (two local cores, two shuffle partitions, no web UI, no progress bars), it sets
two options about timestamps:

* ``spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS``: Spark writes timestamps as the
  deprecated INT96 by default. Delta readers (delta-rs, delta-kernel, DuckDB) expect INT64
  microseconds, and INT96 columns carry no min/max statistics, so data skipping loses them.
  `delta_ops.spark.write_delta` also enforces it for the duration of its own job, so a
  session built elsewhere is safe too.
* ``spark.sql.session.timeZone=UTC``: Delta timestamps are UTC instants, and a UTC session
  shows them as the log and other engines do. It is a display choice only: both writers and
  the reader are exact in any session time zone (timestamp partition values included).

For example:

    spark = get_spark()                                   # local[2]
    spark = get_spark("spark://master:7077", conf={"spark.executor.memory": "4g"})
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from delta_ops.errors import MissingExtra
from delta_ops.spark.workers import activate, is_connect, use_this_python_for_local_workers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Options every session from `get_spark` gets, unless `conf` overrides them.
DEFAULT_CONF: dict[str, str] = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.log.level": "WARN",
    # Delta stores no Spark-specific metadata in the files; keep them small and plain
    "spark.sql.parquet.compression.codec": "snappy",
}

#: Of `DEFAULT_CONF`, what `get_spark_remote` sets in a Connect session: the
#: options about files and timestamps, not the server's sizing.
SESSION_SQL_CONF = (
    "spark.sql.parquet.outputTimestampType",
    "spark.sql.session.timeZone",
    "spark.sql.parquet.compression.codec",
)

#: Added for `local[...]` masters only: no network name lookups, nothing listening outside.
LOCAL_CONF: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def session_conf(master: str, conf: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The options `get_spark` applies: the defaults, then `conf` (which wins)."""
    merged = dict(DEFAULT_CONF)
    if master.startswith("local"):
        merged.update(LOCAL_CONF)
        # Python workers run this interpreter (with pyarrow and delta-ops), not whatever
        # `python3` is first on the PATH
        merged["spark.pyspark.python"] = sys.executable
        merged["spark.pyspark.driver.python"] = sys.executable
    merged.update({str(k): str(v) for k, v in (conf or {}).items()})
    return merged


def get_spark(
    master: str = "local[2]", app_name: str = "delta-ops", conf: Mapping[str, Any] | None = None
) -> SparkSession:
    """Build the process's SparkSession, or reuse the running one.

    Spark keeps one active session per process; when one is already running,
    ``getOrCreate`` returns it and applies the runtime SQL options given here (the master and
    other static options of the running session stay as they were).

    Args:
        master: the Spark master, ``local[2]`` by default (two cores); a cluster URL otherwise.
        app_name: the application name shown by Spark.
        conf: extra Spark options; they override the defaults (see `DEFAULT_CONF`).

    Returns:
        The SparkSession.

    Example (starts a JVM):

        spark = get_spark(conf={"spark.sql.shuffle.partitions": "8"})
    """
    from pyspark.sql import SparkSession

    # start-up cost: `source` imports PySpark, which `import delta_ops.spark` must not
    from delta_ops.spark.source import register

    use_this_python_for_local_workers(master)  # before the JVM starts
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in session_conf(master, conf).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)  # spark.read.format("delta")
    return spark


def _running_connect_session() -> SparkSession | None:
    """The process's Spark Connect session, if one was made (importing PySpark's Connect
    client otherwise would cost start-up time and needs its extra packages)."""
    connect = sys.modules.get("pyspark.sql.connect.session")
    if connect is None:
        return None
    session: SparkSession | None = connect.SparkSession.getActiveSession()
    return session or connect.SparkSession._default_session


#: the Spark Connect sessions `get_spark_remote` made, by URL
_REMOTES: dict[str, SparkSession] = {}


def get_spark_remote(url: str) -> SparkSession:
    """A Spark Connect session to the server at `url` (``sc://host:port``, Databricks' own
    URLs included), with the `delta` source registered; the one made before for `url` if any.

    Example (talks to a running server):

        spark = get_spark_remote("sc://localhost:15002")
    """
    try:  # PySpark's Connect client needs pandas, grpcio and zstandard (the spark extra)
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError as exc:
        raise MissingExtra("spark", f"Spark Connect ({exc.__class__.__name__})") from exc

    # start-up cost: `source` imports PySpark, which `import delta_ops.spark` must not
    from delta_ops.spark.source import register

    known = _REMOTES.get(url)
    if known is not None and not getattr(known, "is_stopped", False):
        return known
    # a session of its own per URL (`getOrCreate` would return any URL's); typed as PySpark's
    # classic session, whose API a Connect session mirrors
    spark = cast("SparkSession", ConnectSession.builder.remote(url).create())
    _REMOTES[url] = spark
    for key in SESSION_SQL_CONF:  # the server's own sizing and static options stay
        spark.conf.set(key, DEFAULT_CONF[key])
    register(spark)
    return spark


def running_session() -> SparkSession:
    """The session Spark work on this thread should use, made active here: the thread's
    active session, else the process's running one (started on another thread), else a
    Spark Connect one the process made, else a new one from `get_spark`. A running
    session's options are left as they are."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession() or SparkSession._instantiatedSession
    if session is not None and is_connect(session):  # PySpark in Connect mode: a remote's
        return session
    if session is not None and session.sparkContext._jsc is not None:  # running, not stopped
        return activate(session)
    return _running_connect_session() or activate(get_spark())


__all__ = [
    "DEFAULT_CONF",
    "SESSION_SQL_CONF",
    "get_spark",
    "get_spark_remote",
    "running_session",
    "session_conf",
]
