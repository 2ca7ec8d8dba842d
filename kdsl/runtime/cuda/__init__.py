"""CUDA support: the driver wrapper (``driver``), CUDA arrays (``device_array``) and
DLPack interchange (``dlpack``). Importing these modules never imports cuda-python; the
driver imports it on first use of a CUDA device."""
