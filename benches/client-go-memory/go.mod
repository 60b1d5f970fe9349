module github.com/ctrlkit/ctrlkit/benches/client-go-memory

go 1.26

require k8s.io/client-go v0.36.3
