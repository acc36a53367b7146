# syntax=docker/dockerfile:1
# One image for every role: seckill serve | worker | migrate | audit | bench.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/seckill ./cmd/seckill

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/seckill /seckill
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/seckill"]
CMD ["serve"]
