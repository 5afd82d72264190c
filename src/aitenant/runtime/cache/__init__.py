"""The cache layer: informers that list and watch kinds into memory (``informer``, keeping
objects packed by ``packing``), and the reads served from them (``reads``). It builds on the
client layer only.
"""
