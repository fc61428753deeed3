# Quire node image: the static quire binary on an empty base, running as a
# non-root user. Nothing is pulled: `make image` builds the binary
# (CGO_ENABLED=0, -trimpath) into bin/image, and this file only copies it.
#
#   make image                    # docker build -t quire:local .
#   docker run --rm -p 127.0.0.1:9092:9092 -v quire-data:/var/lib/quire quire:local \
#     --set advertised.listeners=127.0.0.1:9092
#
# Configuration comes from QUIRE_* environment variables (QUIRE_ + the key
# upper-cased, dots as underscores) or arguments after the image name
# (--config FILE, --set key=value); see docs/configuration.md and
# docker-compose.yml for a 3-node cluster.

FROM scratch
COPY bin/image/quire /usr/local/bin/quire
# The data directory, owned by the user the node runs as, so that a fresh
# named volume mounted there (which takes the ownership of the image's
# directory) is writable. bin/image/data is an empty directory.
COPY --chown=65532:65532 bin/image/data/ /var/lib/quire/
ENV PATH=/usr/local/bin
USER 65532:65532
# The defaults fit a container: log.dirs=/var/lib/quire,
# listeners=0.0.0.0:9092 (set advertised.listeners to an address others dial).
VOLUME ["/var/lib/quire"]
EXPOSE 9092
# No shell: the binary checks itself. It succeeds once the node answers
# SERVING (registered with the controller, hosting its replicas).
HEALTHCHECK --interval=5s --timeout=4s --start-period=20s --retries=3 \
    CMD ["quire", "health", "--brokers", "127.0.0.1:9092"]
ENTRYPOINT ["quire", "server"]
