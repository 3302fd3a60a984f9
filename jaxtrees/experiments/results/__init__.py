"""Where rows live: the columns' layout and checks (:mod:`.layout`), earlier versions' CSV rows (:mod:`.legacy`), the
Parquet store (:mod:`.store`) and the background writer (:mod:`.writer`)."""
