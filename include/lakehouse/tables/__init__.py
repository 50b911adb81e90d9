"""One module per table: its pure ``DataFrame -> DataFrame`` transformations.

Every function here is shared by the incremental (streaming) and the batch (backfill) runs; none
writes, collects, counts or starts a query.
"""
