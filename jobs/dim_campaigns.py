"""Load dims.campaigns (ad -> campaign) from the landing zone's campaigns.csv, replacing it whole.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/dim_campaigns.py [--lakehouse-root DIR]

A batch job: the dimension is small and is replaced atomically (readers of an older version keep
it until their next micro-batch). An ambiguous file (blank ids, an ad in two campaigns) is refused.
"""

from pathlib import Path

from lakehouse.config import ConfigError
from lakehouse.runtime import log, parse_job_args, run_job
from lakehouse.schemas import CAMPAIGNS_SCHEMA
from lakehouse.spark import build_spark_session
from lakehouse.tables.dim_campaigns import campaigns_from_csv, invalid_campaign_rows


def main(argv: list[str] | None = None) -> None:
    args = parse_job_args(__doc__.splitlines()[0], argv, batch=False)
    source = args.lakehouse.landing_campaigns
    if not Path(source).is_file():
        raise ConfigError(f"Campaign file {source} not found: run the generator or copy the dimension there.")
    spark = build_spark_session("dim_campaigns")
    table = args.lakehouse.table("dims.campaigns")

    raw = spark.read.csv(source, header=True, schema=CAMPAIGNS_SCHEMA, mode="FAILFAST")
    campaigns = campaigns_from_csv(raw).cache()
    bad = invalid_campaign_rows(campaigns).limit(5).collect()
    if bad:
        raise ConfigError(f"{source}: blank or repeated ad ids, e.g. {[row.ad_id for row in bad]}; fix the file.")
    campaigns.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(table.path)
    log.info("dims.campaigns: %d ads loaded from %s into %s", campaigns.count(), source, table.path)


if __name__ == "__main__":
    run_job(main)
