# syntax=docker/dockerfile:1
# Tessera's server with its browser bundle. From the repository root:
#   docker build -f deploy/docker/server.Dockerfile -t tessera-server .
# The build runs the same steps as `make demo` (scripts/lib.sh: the pinned
# cargo-leptos, wasm-bindgen and wasm-opt); the image holds the binary and
# the site only, runs as an unprivileged user and needs no writable root
# file system (SQLite, when used, lives on a mounted volume).
FROM node:22-bookworm-slim AS node

FROM rust:1.95-slim-bookworm AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl gzip \
 && rm -rf /var/lib/apt/lists/*
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules /usr/local/lib/node_modules
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm
WORKDIR /src
COPY . .
ENV CARGO_TARGET_DIR=/src/target/cargo
RUN . scripts/lib.sh \
 && ensure_tools \
 && build_release \
 && mkdir -p /out \
 && cp "$CARGO_TARGET_DIR/release/tessera-server" /out/ \
 && cp -r target/site /out/site

# glibc, libgcc and CA certificates; no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/tessera-server /usr/local/bin/tessera-server
COPY --from=build /out/site /usr/share/tessera/site
# distroless's "nonroot" user.
USER 65532:65532
EXPOSE 3000
# The configuration (and its secrets) come from the environment and
# /etc/tessera/tessera.toml, mounted at run time.
HEALTHCHECK --interval=30s --timeout=6s --retries=3 \
  CMD ["/usr/local/bin/tessera-server", "--config", "/etc/tessera/tessera.toml", "health"]
ENTRYPOINT ["/usr/local/bin/tessera-server"]
CMD ["--config", "/etc/tessera/tessera.toml"]
