"""Reports: terminal tables now; every figure comes from evaluation records."""
