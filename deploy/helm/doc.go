// Package helm holds the test of the Helm chart in rscoord/: it lints and
// renders the chart with the pinned Helm and decodes every object strictly
// into the Kubernetes API types.
package helm
