"""Attention kernels: Triton kernels beside their wrappers, and their plain-torch twins."""
