# Builds the project's commands as static binaries into a minimal, non-root
# image that runs one of them. azd builds it once per service (see
# azure.yaml), with CMD naming the service's command:
#
#   docker build -t orderworker .
#   docker build --build-arg CMD=orderproducer -t orderproducer .
#   docker build --build-arg CMD=orderrelay -t orderrelay .
#
# Every command under ./cmd is compiled in one layer that does not depend on
# CMD, so the services' builds share it, and every image carries all of them
# in /bin. /app, the entrypoint, is CMD's binary.
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
# TARGETARCH is set by BuildKit from --platform; the classic builder leaves it
# empty, and Container Apps runs linux/amd64.
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux GOARCH=${TARGETARCH:-amd64} \
    go build -trimpath -ldflags='-s -w' -o /out/bin/ ./cmd/...
# CMD names the directory under ./cmd whose binary the image runs:
# orderworker, orderproducer, orderrelay, orderctl. Declared after the build,
# so a different CMD reuses the build layer.
ARG CMD=orderworker
RUN if [ ! -x "/out/bin/${CMD}" ]; then echo "no command ./cmd/${CMD}; have:" $(ls /out/bin) >&2; exit 1; fi \
    && cp "/out/bin/${CMD}" /out/app

# scratch: nothing but the binaries and the CA certificates they need to
# reach Azure over TLS (taken from the pinned build image). No shell, no package
# manager, and no base image that could move under a tag.
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/bin/ /bin/
COPY --from=build /out/app /app
# 65532 is the conventional unprivileged "nonroot" uid and gid.
USER 65532:65532
ENTRYPOINT ["/app"]
