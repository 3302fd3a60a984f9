"""What users read: statistics of rows (:mod:`.fits`: censored fits; :mod:`.steps`: step counts; :mod:`.thresholds`:
thresholds and bootstrap intervals), summaries and figure helpers (:mod:`.summary`), a user's study's figures and
report (:mod:`.generic`)."""
