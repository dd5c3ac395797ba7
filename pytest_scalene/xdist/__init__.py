"""xdist"""
