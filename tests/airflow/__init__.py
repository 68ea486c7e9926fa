"""The Airflow provider (`delta_ops.airflow`), on real Airflow with a SQLite database; run in a pytest process of their own (`make test`)."""
