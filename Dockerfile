# syntax=docker/dockerfile:1
#
# The doclog image: `doclog` (the service: serve, migrate) and `doclogctl`
# (the admin CLI), built as static binaries and run as an unprivileged user
# on an empty base image — no shell, no package manager, nothing to patch
# but the two binaries.
#
#   docker build -t doclog/doclog:0.1.0 .
#
# The Helm chart (helm/doclog) runs `doclog serve --roles=<role>` and
# `doclog migrate` as user 65532; `doclog dev` is not meant for this image
# (it starts a local Postgres, which the image does not carry).

FROM golang:1.26 AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath GOCACHE=/cache/go-build
# Dependencies first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/cache/go-build \
    go build -ldflags="-s -w" -o /out/doclog ./cmd/doclog && \
    go build -ldflags="-s -w" -o /out/doclogctl ./cmd/doclogctl
# The runtime's few files: a user and group for 65532, and a /tmp for
# `docker run` (the chart mounts an emptyDir there, the root is read-only).
RUN mkdir -p /rootfs/etc /rootfs/tmp && chmod 1777 /rootfs/tmp && \
    echo 'doclog:x:65532:65532:doclog:/nonexistent:/sbin/nologin' >/rootfs/etc/passwd && \
    echo 'doclog:x:65532:' >/rootfs/etc/group

FROM scratch
# CA roots for TLS to Kafka, Postgres and ClickHouse.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /rootfs/ /
COPY --from=build /out/doclog /usr/local/bin/doclog
COPY --from=build /out/doclogctl /usr/local/bin/doclogctl
ENV PATH=/usr/local/bin
USER 65532:65532
# 8080: the ingest and readstore APIs; 9090: /healthz, /readyz, /metrics.
EXPOSE 8080 9090
ENTRYPOINT ["doclog"]
CMD ["serve", "--roles=ingest,executor,projectors,readstore"]
