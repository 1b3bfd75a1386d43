"""Code shared by the simulated router and worker (standard library only)."""
