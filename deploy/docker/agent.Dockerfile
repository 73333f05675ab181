# syntax=docker/dockerfile:1
# Tessera's host agent. From the repository root:
#   docker build -f deploy/docker/agent.Dockerfile -t tessera-agent .
#
# What it needs from the host (deploy/kustomize/base/agent.yaml sets it up):
# - the NVIDIA driver and the NVIDIA container toolkit (runtimeClassName
#   nvidia): with NVIDIA_DRIVER_CAPABILITIES=compute,utility the toolkit
#   mounts libnvidia-ml.so.1 (NVML, loaded at run time), nvidia-smi and
#   nvidia-cuda-mps-control, and /dev/nvidia*;
# - root and privileged mode: MIG changes, the MPS daemon and stopping a
#   released slice's processes (with the host's PID namespace) are root's
#   business on a GPU host. The image's own user is unprivileged; the
#   DaemonSet asks for root explicitly;
# - host paths: the state directory (the host credential), the device
#   plugin's config directory (time-slicing replicas it reads) and the MPS
#   pipe root (/var/run/tessera/mps), shared with the slices' pods.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p tessera-agent \
 && cp target/release/tessera-agent /tessera-agent

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /tessera-agent /usr/local/bin/tessera-agent
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
# distroless's "nonroot" user.
USER 65532:65532
# Healthy while NVML answers: reads the GPUs and changes nothing.
HEALTHCHECK --interval=60s --timeout=20s --retries=3 \
  CMD ["/usr/local/bin/tessera-agent", "probe", "--rounds", "1", "--interval-ms", "0"]
ENTRYPOINT ["/usr/local/bin/tessera-agent"]
