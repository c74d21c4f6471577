// Package producerit holds the tests of client/producer that need the real
// coordinator (coordtest) next to real Redis (standalone and
// cluster): routing, publishing, batches, scale-outs and stale routes. The
// producer tests that need neither stay beside the package in the client
// module.
package producerit
