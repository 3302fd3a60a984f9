"""Where rows live: the background writer (:mod:`.writer`), the columns' layout and checks (:mod:`.layout`), earlier
versions' CSV rows (:mod:`.legacy`), the directory's files (:mod:`.files`), the rows read back (:mod:`.reading`:
:func:`read_results`, :func:`export_csv`) and the Parquet store that writes and locks (:mod:`.store`)."""

from jaxtrees.experiments.results.reading import export_csv, read_results

__all__ = ["export_csv", "read_results"]
