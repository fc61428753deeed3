# syntax=docker/dockerfile:1
#
# Quire node image: a static quire binary on distroless, running as nonroot.
#
#   docker build -t quire .
#   docker run --rm -p 127.0.0.1:9092:9092 -v quire-data:/var/lib/quire quire \
#     --set advertised.listeners=127.0.0.1:9092
#
# Configuration comes from QUIRE_* environment variables (QUIRE_ + the key
# upper-cased, dots as underscores) or arguments after the image name
# (--config FILE, --set key=value); see docs/configuration.md and
# docker-compose.yml for a 3-node cluster.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-mod=readonly
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags "-s -w" -o /out/quire ./cmd/quire
# The data directory, owned by distroless's nonroot user (65532), so that a
# fresh named volume mounted there is writable.
RUN mkdir -p /out/var/lib/quire

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/quire /usr/local/bin/quire
COPY --from=build --chown=65532:65532 /out/var/lib/quire /var/lib/quire
USER 65532:65532
# The defaults already fit a container: log.dirs=/var/lib/quire,
# listeners=0.0.0.0:9092 (set advertised.listeners to an address others dial).
VOLUME ["/var/lib/quire"]
EXPOSE 9092
# No shell in distroless: the binary checks itself (exec form). It succeeds
# once the node answers DescribeCluster on its own port.
HEALTHCHECK --interval=5s --timeout=4s --start-period=20s --retries=3 \
    CMD ["quire", "cluster", "info", "--brokers", "127.0.0.1:9092"]
ENTRYPOINT ["quire", "server"]
