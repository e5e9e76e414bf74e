"""Real-kernel calibration for simcluster (needs torch).

``simcluster calibrate`` runs the microbenchmarks in this package on the device at
hand, fits cost models and writes a profile the simulator loads unchanged
(:mod:`simcluster.compute.measured`). Modules:

* :mod:`calibrate.timing`: warm-up, repetitions, synchronisation, median and spread;
* :mod:`calibrate.fit`: non-negative least squares on relative errors;
* :mod:`calibrate.layers`: forward / input-gradient / weight-gradient time of zoo layers;
* :mod:`calibrate.kernels`: sparsification, H-SADMM projection and shrinkage, sparse
  kernels, copies, optimizer step, roofline probes;
* :mod:`calibrate.collectives`: torch.distributed sweeps fitted to alpha + n * beta;
* :mod:`calibrate.models`: real ``nn.Module`` ResNets for the whole-model check;
* :mod:`calibrate.runner`: the plan (tiny / quick / full), provenance, the profile files.

Only the profile format is shared with the simulator; nothing here is imported by it.
"""
