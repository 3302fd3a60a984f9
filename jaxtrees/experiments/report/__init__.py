"""What users read: statistics of rows (:mod:`.analysis`: censored fits, thresholds, bootstraps), summaries and
figure helpers (:mod:`.summary`), a user's study's figures and report (:mod:`.generic`)."""
