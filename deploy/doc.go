// Package deploy holds what runs Airlock as a service — the systemd unit,
// the Caddy and nginx TLS recipes, the Kubernetes manifests and the
// container image's files — and the tests of each and of the image
// (../Containerfile). It has no code; docs/operations.md describes them.
package deploy
