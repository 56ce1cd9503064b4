# Builds one of the project's commands as a static binary in a minimal,
# non-root image. azd builds it once per service (see azure.yaml):
#
#   docker build -t orderworker .
#   docker build --build-arg CMD=orderproducer -t orderproducer .
#
# The file uses no BuildKit-only feature (no `# syntax` directive, no
# `RUN --mount`, no `--platform=$BUILDPLATFORM`, no heredocs), so the classic
# builder and registry-side builds (`docker.remoteBuild: true` in azure.yaml,
# which builds with ACR Tasks) build it as they build it locally.
#
# Base images are pinned by exact version tag. A tag can still be re-pushed;
# to pin the bytes, append the digest (see infra/README.md, "Base images"):
#   FROM golang:1.26.8-trixie@sha256:<digest> AS build

# GO_VERSION is the exact Go release to build with (at least go.mod's).
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-trixie AS build
# CMD names the directory under ./cmd to build: orderworker or orderproducer.
ARG CMD=orderworker
# TARGETARCH is set by BuildKit from --platform; the classic builder leaves it
# empty, and Container Apps runs linux/amd64.
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux GOARCH=${TARGETARCH:-amd64} \
    go build -trimpath -ldflags='-s -w' -o /out/app ./cmd/${CMD}

# scratch: nothing but the binary and the CA certificates it needs to reach
# Azure over TLS (taken from the pinned build image). No shell, no package
# manager, and no base image that could move under a tag.
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/app /app
# 65532 is the conventional unprivileged "nonroot" uid and gid.
USER 65532:65532
ENTRYPOINT ["/app"]
