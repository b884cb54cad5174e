"""Readers of real node hardware: InfiniBand sysfs, NVML / nvidia-smi, and the kernel log.

Entry point for the agent: ``agents.real.source.make_real_source``. Nothing here needs a GPU, an
HCA or root to import; readers report missing hardware as errors, not exceptions.
"""
