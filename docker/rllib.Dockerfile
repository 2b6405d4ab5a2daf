# The image of docs/distributed.md's KubeRay RayJob: Ray 2.60 with RLlib, the CPU build of
# torch (on purpose: env runners sample on CPUs, and the CUDA build is several GB), and this
# project with the train and integrations extras. Build from the repository root:
#   docker build -f docker/rllib.Dockerfile -t registry.example.org/butifarra-rl:0.1 .
FROM rayproject/ray:2.60.0-py311-cpu

WORKDIR /home/ray/butifarra-rl
# torch first, from the CPU wheel index, so that the extras below do not pull a CUDA build
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY --chown=ray:users . .
# [train] is what the trainer needs; add ,integrations for the other frameworks' clients
RUN pip install --no-cache-dir ".[train]" "ray[rllib]==2.60.0"
WORKDIR /home/ray
