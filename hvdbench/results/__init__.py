"""Results: the one result schema, the append-only run store, aggregation, tables and plots."""
