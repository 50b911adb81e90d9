"""Tools around the lakehouse: data generator, Kafka producer, oracle, demo, fault harness, JVM warm-up.

They import the runtime package (``lakehouse``), never the other way round, and are not shipped
to Spark executors (``include/cluster/pyfiles.py`` zips ``lakehouse`` only).
"""
