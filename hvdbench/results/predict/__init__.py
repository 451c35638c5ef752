"""Prediction: layouts not run, from the runs that were. throughput.py (samples/s from the step-time
breakdown and the allreduce bench), time_to_train.py (on top of it: convergence, the training rate,
evaluation), fitting.py (the least squares both use)."""
