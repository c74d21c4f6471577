// Package e2e holds the end-to-end tests: the coordinator binary, sample
// consumer and publisher pods as real processes, and a real 3-master Redis
// Cluster, with pods killed and stopped mid-run. It has no code of its own.
package e2e
