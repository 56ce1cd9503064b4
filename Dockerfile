# syntax=docker/dockerfile:1
#
# Builds one of the project's commands as a static binary in a small,
# non-root image. azd builds it once per service (see azure.yaml):
#
#   docker build -t orderworker .
#   docker build --build-arg CMD=orderproducer -t orderproducer .
#
# The binary is built on the build platform and cross-compiled for the target
# (CGO is off), so multi-platform builds do not run the compiler under
# emulation.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
# CMD names the directory under ./cmd to build: orderworker or orderproducer.
ARG CMD=orderworker
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags='-s -w' -o /out/app ./cmd/${CMD}

# distroless/static: CA certificates and tzdata, no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/app /app
USER nonroot:nonroot
ENTRYPOINT ["/app"]
