"""What the committed measurements add up to, measuring nothing: ``generate`` writes
reports/RESULTS.md (and the section files it links) and reports/results/waterfalls.json from the
committed snapshots and profiles; ``attribution`` prices every committed e2e and serving
check's waterfall again; ``published`` and ``mlperf`` predict the figures engine makers and
MLCommons published (the outside anchors).
"""
