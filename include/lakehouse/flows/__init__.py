"""How tables are written: one flow per write kind of the catalog, shared by every table of that kind.

A flow owns the streaming protocol of its kind (what happens to each micro-batch, and the batch
form a backfill runs); the table owns its transform. ``lakehouse.runner`` picks the flow.
"""
