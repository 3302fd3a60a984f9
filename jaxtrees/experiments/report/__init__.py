"""What users read: statistics of rows (:mod:`.fits`: censored fits; :mod:`.steps`: step counts; :mod:`.thresholds`:
thresholds and bootstrap intervals), the parts of figures and reports (:mod:`.summary`) and their writing
(:mod:`.saving`), a user's study's figure and report (:mod:`.generic_figure`, :mod:`.generic_report`, from the groups
of :mod:`.generic`)."""
