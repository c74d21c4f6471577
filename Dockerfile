# The rscoord image, for those who build with Docker. `go tool task image`
# builds the same image without a container engine (internal/image); a test
# (internal/image) keeps the build flags, paths and user of both in step.
# The "pods" target is the sample consumer-pod and publisher-pod that
# compose.yaml runs (docker build --target pods -t rscoord-pods:latest .).
#
# VERSION and REVISION stamp the binary (internal/version) and the image
# labels. The build context holds no .git (.dockerignore), so pass them:
#
#   eval "$(go tool task version)"
#   docker build --build-arg VERSION="$VERSION" --build-arg REVISION="$REVISION" -t rscoord .
#
# Without them the version is the VERSION file's release and the revision
# is unknown. A test keeps the default equal to the VERSION file.
ARG VERSION=0.1.0
ARG REVISION=unknown

FROM golang:1.26-bookworm AS build
ARG VERSION
ARG REVISION
WORKDIR /src
COPY go.mod go.sum ./
# The client module (client/) is required through a replace to ./client.
COPY client/go.mod client/go.sum ./client/
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w -X github.com/rscoord/rscoord/internal/version.version=${VERSION} -X github.com/rscoord/rscoord/internal/version.revision=${REVISION}" -o /out/rscoord ./cmd/rscoord
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" -o /out/ ./cmd/consumer-pod ./cmd/publisher-pod
RUN mkdir -p /out/data

FROM scratch AS pods
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/consumer-pod /consumer-pod
COPY --from=build /out/publisher-pod /publisher-pod
COPY --from=build --chown=65532:65532 /out/data /data
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /data
ENTRYPOINT ["/consumer-pod"]

FROM scratch AS rscoord
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="rscoord" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/rscoord/rscoord" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/rscoord /rscoord
COPY --from=build --chown=65532:65532 /out/data /data
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /data
EXPOSE 8080
VOLUME /data
ENTRYPOINT ["/rscoord"]
CMD ["serve", "--listen", "0.0.0.0:8080", "--data-dir", "/data"]
