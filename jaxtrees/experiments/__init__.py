"""Experiments: what a user declares (:mod:`.study`), how it runs (:mod:`.run`), where its rows live
(:mod:`.results`), what users read (:mod:`.report`), the built-in studies (:mod:`.studies`), and on top
:mod:`.api` (``jt.run``), :mod:`.loading` and :mod:`.reporting`."""
