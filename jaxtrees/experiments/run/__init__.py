"""How a study runs: the runner (:mod:`.runner`), compiled programs (:mod:`.compiled`), compile workers
(:mod:`.workers`), JAX's compilation cache (:mod:`.xla_cache`) and the program cache (:mod:`.programs`), the
distributed start (:mod:`.distributed`) and progress (:mod:`.progress`)."""
