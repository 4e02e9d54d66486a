"""The one GPU run: ``bash kernels/gpu/run.sh OUT`` (see :mod:`kernels.gpu.run`).

``plan`` says what runs, at which sizes, in which order and under which time caps (data);
``run`` runs it stage by stage into ``OUT`` and repacks ``OUT`` after each stage;
``register`` writes the predictions the run will be checked against before it runs, and
compares a run's results with them afterwards; ``cases`` runs calibrate and validate on the
GPU case set (its calibrate, draw and agree stages); ``transfer`` predicts one GPU from another's
profile.
"""
