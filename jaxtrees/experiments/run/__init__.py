"""How a study runs: the runner (:mod:`.runner`), compiled programs (:mod:`.compiled`), compile workers
(:mod:`.workers`), the program and XLA caches (:mod:`.cache`), the distributed start (:mod:`.distributed`) and
progress (:mod:`.progress`)."""
