"""Console scripts: kiln (run, conformance), kiln-opt, kiln-translate."""
