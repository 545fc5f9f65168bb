"""Studies over the run matrix: the paper's matrix and numbers, and the seeded CPU-scale preset
(its runs, skip/resume, statistics over seeds, tables and plots)."""
