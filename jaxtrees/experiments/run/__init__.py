"""How a study runs: the runner (:mod:`.runner`) and the steps of a run (:mod:`.job`, :mod:`.pacing`,
:mod:`.memory`), compiled programs (:mod:`.compiled`), compile workers (:mod:`.workers`), JAX's compilation cache
(:mod:`.xla_cache`) and the program cache (:mod:`.programs`), the distributed start (:mod:`.distributed`, with its
keeper process, :mod:`.keeper`) and progress (:mod:`.progress`)."""
