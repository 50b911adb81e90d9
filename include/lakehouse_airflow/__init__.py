"""The Airflow face of the lakehouse: the operator that runs a job, the DAGs' macros and preflight.

Imported by DAG files and Airflow workers only; never shipped to Spark executors, and the runtime
package (``lakehouse``) never imports it or Airflow.
"""
