// Package helmtest checks the Helm chart in helm/doclog with the real helm
// binary (helm.sh/helm/v3, pinned, built from the Go module proxy into the
// repository's git-ignored .cache/bin on first use): it lints the chart,
// renders it with default and production-like values, decodes every manifest
// strictly into Kubernetes API types, and checks the image's Dockerfile
// installs the binary the chart runs. The package holds only tests.
package helmtest
