"""Where lines and liveness evidence come from: files, processes, probes."""
