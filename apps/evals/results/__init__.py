"""The result writer and reading results back: the writer, its batches and hand-off, a stored
run read as engine values, the search index, and who executes a run."""
