"""Power, performance and area models for sweeps: the constants table (`table`), SRAM costs
(`sram`), the area model calibrated on Yosys (`area`, `calibrate`, `sample`, `yosys_sample`)
and the energy of a run from its `Stats` (`energy`)."""
