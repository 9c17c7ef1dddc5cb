# Source on a GPU machine without network: installs the carried wheels (.whl/) into /tmp/site
# and puts them and src/ on PYTHONPATH, keeping the machine's own torch.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 KERNELSEARCH_HOME=/tmp/kshome
python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0))"
