#!/bin/bash
# Temporary: build the six extensions in parallel, then check on the GPU. Usage: run.sh [stems]
cd "$(dirname "$0")"
export TORCH_EXTENSIONS_DIR=/tmp/ks_ext PYTHONUNBUFFERED=1 MAX_JOBS=4
nvidia-smi -L; python3 -c "import torch, triton; print(torch.__version__, torch.version.cuda, triton.__version__, torch.cuda.get_device_name())"
t0=$(date +%s)
for f in ../0*.py; do
  ( python3 -c "import importlib.util,sys; s=importlib.util.spec_from_file_location('m','$f'); m=importlib.util.module_from_spec(s); s.loader.exec_module(m)" > /tmp/build_$(basename $f).log 2>&1 || { echo "BUILD FAIL $f"; cat /tmp/build_$(basename $f).log; } ) &
done
wait
echo "builds done in $(( $(date +%s) - t0 ))s"
python3 check.py "$@" 2>&1 | tee ${OUT:-/tmp}/check.log
echo "=== compute-sanitizer memcheck, small sizes, cuda backend"
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout ${SAN_TIMEOUT:-240} compute-sanitizer --tool memcheck --print-limit 20 python3 check.py --small --cuda-only "$@" 2>&1 | tail -150 | tee ${OUT:-/tmp}/sanitizer.log
