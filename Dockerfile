# The rscoord image, for those who build with Docker. `go tool task image`
# builds the same image without a container engine (internal/image); a test
# (internal/image) keeps the build flags, paths and user of both in step.
# The "pods" target is the sample consumer-pod and publisher-pod that
# compose.yaml runs (docker build --target pods -t rscoord-pods:latest .).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
# The client module (client/) is required through a replace to ./client.
COPY client/go.mod client/go.sum ./client/
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" -o /out/rscoord ./cmd/rscoord
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
