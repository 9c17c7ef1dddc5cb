"""Outputs from the candidate's worker to the judge.

On a GPU an output is copied into an allocation of its own that the driver can export as a file
descriptor (``vmm.py``); the worker sends the descriptor to the parent over a private socket
(``fds.py``) and drops its own mapping. The parent holds the descriptors, which keep the memory
alive, until the candidate's worker has exited, and then passes them to the judge, which maps
each one, copies it out and lets it go (``outputs.py``). No file is written, and no process the
candidate ran in exists when the judge reads. Tensor files (``handover/codec.py``) remain the way on
the CPU, and on a GPU for what does not fit beside the evaluation in device memory.
"""
